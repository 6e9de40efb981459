"""The measurements of one ``(N, D)`` position table, of any kind: scale (3.3), dominant periods
(3.2), proximity properties and probes; and the comparison of two tables (encoder and decoder).

Each function returns ``(report, extras)``: ``report`` is JSON-ready, ``extras`` holds the arrays
the figures need (per-position norms, the Gram matrix, per-offset errors) that stay out of the
JSON.
"""

import torch

from posenc.analysis.measure import probes as probes_mod
from posenc.analysis.measure.periods import dominant_periods
from posenc.analysis.measure.properties import attention_logit_properties, dot_product_properties, gram
from posenc.analysis.measure.scale import dim_ranges, init_token_comparison, norm_stats


def analyze_table(table: torch.Tensor, *, run_probes: bool = True, folds: int = 5, seed: int = 0, attention=None):
    """Scale (3.3), dominant periods (3.2), proximity properties and probes of any ``(N, D)``
    table. ``attention``: ``(w_q, w_k, heads, scaling)`` of the first self-attention layer the
    table feeds, for the attention-logit properties next to the dot product's."""
    t = table.to(torch.float64)
    ranges = dim_ranges(t)
    stats = norm_stats(t)
    periods = dominant_periods(t)
    report = {
        "positions": int(t.size(0)),
        "dim": int(t.size(1)),
        "scale": {**stats, **{k: v for k, v in ranges.items() if not k.startswith("per_dim")},
                  "init_tokens": init_token_comparison(stats["norm_mean"], t.size(1))},
        "dominant_period": {"min": float(periods.min()), "median": float(periods.median()),
                            "max": float(periods.max())},
        "properties": dot_product_properties(t),
    }
    logits = None
    if attention is not None:
        report["attention_logit_properties"], logits = attention_logit_properties(t, *attention)
    if run_probes and t.size(0) >= 2 * folds:  # every fold needs >= 2 held-out positions
        report["probes"] = probes_mod.probes(t, folds=folds, seed=seed)
    extras = {
        "table": t,
        "norms": t.norm(dim=1),
        "dim_min": torch.tensor(ranges["per_dim_min"]),
        "dim_max": torch.tensor(ranges["per_dim_max"]),
        "gram": gram(t),
        "periods": periods,
        "attention_logits": logits,
    }
    return report, extras


def compare_tables(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Encoder vs decoder: the cosine of the two rows of each position (are they the same
    vectors?) and the correlation of their position-by-position cosine matrices (do they have
    the same geometry, whatever the basis?)."""
    n = min(a.size(0), b.size(0))
    a, b = a[:n].to(torch.float64), b[:n].to(torch.float64)
    an = a / a.norm(dim=1, keepdim=True).clamp_min(1e-300)
    bn = b / b.norm(dim=1, keepdim=True).clamp_min(1e-300)
    rowwise = (an * bn).sum(1)
    ca, cb = an @ an.T, bn @ bn.T
    off = ~torch.eye(n, dtype=torch.bool)
    x, y = ca[off], cb[off]
    corr = float(torch.corrcoef(torch.stack([x, y]))[0, 1]) if n > 2 else float("nan")
    return {"positions_compared": n, "rowwise_cosine_mean": float(rowwise.mean()),
            "rowwise_cosine_min": float(rowwise.min()), "cosine_structure_correlation": corr}


__all__ = ["analyze_table", "compare_tables"]
