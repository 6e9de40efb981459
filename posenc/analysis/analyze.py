"""The measurements for one table (any kind) and for the closed-form sinusoid (both variants).

Each function returns ``(report, extras)``: ``report`` is JSON-ready, ``extras`` holds the arrays
the figures need (per-position norms, the Gram matrix, per-offset errors) that stay out of the
JSON.
"""

import math

import torch

from posenc.analysis import probes as probes_mod
from posenc.analysis.properties import attention_logit_properties, dot_product_properties, gram
from posenc.analysis.relative import factorisation_check, fit_shift_lstsq, relative_linear_errors
from posenc.analysis.scale import dim_ranges, init_token_comparison, norm_stats
from posenc.analysis.values import dominant_periods, sinusoid_wavelengths
from posenc.encodings.defaults import SINUSOID_BASE
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, sinusoid_frequencies, sinusoid_table

LSTSQ_KS = (1, 2, 3, 5, 10, 50, 100)


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


def analyze_sinusoid(dim: int, max_len: int, variant: str = "paper", *, base: float = SINUSOID_BASE,
                     run_probes: bool = True, folds: int = 5, seed: int = 0, lstsq_ks=LSTSQ_KS):
    """Exercises 3.1 to 3.3 plus properties and probes for rows PE(0) .. PE(max_len - 1)."""
    t64 = sinusoid_table(max_len, dim, variant, dtype=torch.float64, base=base)
    t32 = sinusoid_table(max_len, dim, variant, dtype=torch.float32, base=base)
    rel64 = relative_linear_errors(t64, variant, base=base)
    rel32 = relative_linear_errors(t32, variant, base=base)
    fits = []
    for k in lstsq_ks:
        if k <= max_len - 3:
            fit = fit_shift_lstsq(t64, k, variant, base=base)
            fits.append({"k": k, "full": fit["full"], "block": fit["block"]})
    fact = factorisation_check(t64, variant, base=base)
    measured, extras = analyze_table(t64, run_probes=run_probes, folds=folds, seed=seed)
    wl = sinusoid_wavelengths(dim, variant, base=base)
    freqs = sinusoid_frequencies(dim, variant, dtype=torch.float64, base=base)
    report = {
        "variant": variant,
        "dim": dim,
        "max_len": max_len,
        "base": base,
        "relative": {
            "max_error_float64": rel64["max_error"],
            "worst_k_float64": rel64["worst_k"],
            "max_error_float32": rel32["max_error"],
            "worst_k_float32": rel32["worst_k"],
            "pairs_checked": rel64["pairs_checked"],
            "offsets_checked": f"k = 0..{max_len - 1}, all p with p + k < {max_len}",
            "lstsq": fits,
            "factorisation": fact,
        },
        "values": {
            "frequencies": freqs.tolist(),
            "wavelengths": wl.tolist(),
            "wavelength_min": float(wl.min()),
            "wavelength_max": float(wl.max()),
        },
        **measured,
    }
    report["scale"]["norm_expected"] = math.sqrt(dim / 2)
    extras.update({"relative_ks": rel64["ks"], "relative_per_k_float64": rel64["per_k"],
                   "relative_per_k_float32": rel32["per_k"], "wavelengths": wl})
    return report, extras


def sinusoid_report(dim: int, max_len: int, variant: str = "paper", base: float = SINUSOID_BASE, **kwargs):
    """Both variants under ``variants``; the contract keys of ``variant`` at top level."""
    variants, extras = {}, {}
    for v in SINUSOID_VARIANTS:
        variants[v], extras[v] = analyze_sinusoid(dim, max_len, v, base=base, **kwargs)
    chosen = variants[variant]
    props = chosen["properties"]
    report = {
        "tool": "posenc-pe",
        "mode": "sinusoidal",
        "variant": variant,
        "dim": dim,
        "max_len": max_len,
        "base": base,
        "positions": f"row p is PE(p), p = 0..{max_len - 1} (no padding row)",
        "relative_linear_max_error": chosen["relative"]["max_error_float64"],
        "relative_linear_max_error_float32": chosen["relative"]["max_error_float32"],
        "norm_mean": chosen["scale"]["norm_mean"],
        "norm_std": chosen["scale"]["norm_std"],
        "norm_expected": chosen["scale"]["norm_expected"],
        "proximity": props["proximity"],
        "translation_invariance": props["translation_invariance"],
        "monotonicity": props["monotonicity"],
        "symmetry": props["symmetry"],
        "symmetry_holds_by_construction": True,
        "symmetry_note": "phi(x, y) = <PE_x, PE_y> = phi(y, x) for any table: 1 by construction, not a finding",
        "pe_to_token_norm_ratio": chosen["scale"]["init_tokens"]["transformer"]["pe_to_token_norm_ratio"],
    }
    if "probes" in chosen:
        report["absolute_position_mae"] = chosen["probes"]["absolute_position"]["mae"]
        report["relative_order_error"] = chosen["probes"]["relative_order"]["error"]
    report["variants"] = variants
    return report, extras


__all__ = ["analyze_sinusoid", "analyze_table", "sinusoid_report"]


def checkpoint_report(path: str, *, padding_idx=None, max_len=None, run_probes: bool = True, folds: int = 5,
                      seed: int = 0, require_table: bool = True):
    """Extract the encoder and decoder position tables of a fairseq checkpoint and run the table
    measurements on each; compare them when both exist with the same width. A side with a
    relative attention bias (t5, alibi) gets its bias per head and distance under
    ``relative_bias`` instead, one with relative key and value vectors (shaw) those per layer and
    distance under ``relative_vectors``. ``require_table``: a CheckpointError when no side has either."""
    from posenc.analysis.bias import extract_rebuilt
    from posenc.analysis.bias_summary import bias_summary
    from posenc.analysis.checkpoint import extract_tables, first_layer_attention, nothing_to_analyse, token_embedding
    from posenc.analysis.checkpoint_file import checkpoint_family, load_checkpoint, model_args
    from posenc.analysis.scale import token_norms
    from posenc.analysis.vectors import vectors_summary
    from posenc.kinds import BIAS, VECTORS

    ckpt = load_checkpoint(path)
    tables = extract_tables(ckpt, padding_idx=padding_idx, max_len=max_len, require_table=False)
    rebuilt, why = extract_rebuilt(ckpt, {side: pt.kind for side, pt in tables.items()}, max_len=max_len)
    if require_table and not rebuilt and all(pt.table is None for pt in tables.values()):
        raise nothing_to_analyse(tables, why)
    args = model_args(ckpt)
    sides, extras = {}, {}
    for side, pt in tables.items():
        entry = {"kind": pt.kind, "source": pt.source, "notes": pt.notes + ([why[side]] if side in why else [])}
        if side in rebuilt:  # what the kind's registration rebuilds, under the key of what it is
            reads, result = rebuilt[side]
            entry["source"] = result.source
            key, summary = {BIAS: ("relative_bias", bias_summary),
                            VECTORS: ("relative_vectors", vectors_summary)}[reads]
            entry[key] = summary(result)
        if pt.table is not None:
            w_q, w_k, heads, scaling, attn_note = first_layer_attention(ckpt, side)
            attention = (w_q, w_k, heads, scaling) if w_q is not None and w_q.size(1) == pt.table.size(1) else None
            rep, ex = analyze_table(pt.table, run_probes=run_probes, folds=folds, seed=seed, attention=attention)
            if attention is not None:
                rep["attention_logit_properties"]["note"] = attn_note
            else:
                entry["attention_logit_properties_absent"] = attn_note
            entry.update({"padding_idx": pt.padding_idx, "first_row": pt.first_row,
                          "rows_in_checkpoint": pt.rows_in_checkpoint, "trained_positions": pt.trained_positions},
                         **rep)
            if pt.settings:
                entry["settings"] = pt.settings
            tok, scale, note = token_embedding(ckpt, side)
            if tok is not None and tok.size(1) == pt.table.size(1):
                tn = token_norms(tok, scale, padding_idx=pt.padding_idx)
                tn["note"] = note
                tn["pe_to_token_norm_ratio"] = rep["scale"]["norm_mean"] / tn["token_norm_mean"]
                entry["scale"]["trained_tokens"] = tn
            extras[side] = ex
        sides[side] = entry
    report = {
        "tool": "posenc-pe",
        "mode": "checkpoint",
        "checkpoint": str(path),
        "arch": str(args.get("arch", "") or args.get("_name", "")),
        "family": checkpoint_family(args, ckpt["model"]),
        "kinds": {side: e["kind"] for side, e in sides.items()},
        "positions": "row p is position p of a sentence (p = 0: first token), i.e. state-dict row padding_idx + 1 + p",
        "tables": sides,
    }
    if len(extras) == 2 and extras["encoder"]["table"].size(1) == extras["decoder"]["table"].size(1):
        report["comparison"] = compare_tables(extras["encoder"]["table"], extras["decoder"]["table"])
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


__all__ += ["checkpoint_report", "compare_tables"]
