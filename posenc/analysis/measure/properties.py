"""Proximity properties of Wang et al., "On Position Embeddings in BERT" (ICLR 2021), as numeric
indicators (1 = the property holds), for a proximity matrix ``G[x, y] = phi(x, y)`` (row x: the
query position, column y: the key position).

Two proximities are measured, and every number says which one it belongs to:

* the **dot product** ``phi(x, y) = <PE_x, PE_y>`` (any table). It is symmetric in its two
  arguments by construction, so its ``symmetry`` is 1 up to rounding and is reported as holding
  by construction, not as a finding.
* the **attention logits** of the first layer's self-attention heads,
  ``phi_h(x, y) = s (PE_x W_Q^h) . (PE_y W_K^h)``, with fairseq's query scaling ``s = d_h^-1/2``:
  the position-position term of what head h computes before the softmax. W_Q^h != W_K^h makes
  it asymmetric in general, so here symmetry is a real question.

Indicators, for either:

* ``translation_invariance``: the share of the variance of phi(x, y) over all ordered pairs
  x != y that the signed offset y - x explains, 1 - (within-offset sum of squares) / (total sum
  of squares). Exactly 1 when phi depends on the offset only; ~0 for a random table.
* ``monotonicity``: proximity falls as the offset grows. For every anchor x, minus Spearman's rank
  correlation between m and phi(x, x+m) over forward offsets m >= 1 (and likewise backward,
  phi(x, x-m)); the mean over anchors with at least 3 offsets, forward and backward averaged.
  1 = strictly decreasing everywhere, ~0 for a random table, -1 = strictly increasing.
* ``symmetry``: phi(x, y) = phi(y, x). Pearson correlation of phi(x, y) with phi(y, x) over all
  ordered pairs x != y: 1 = symmetric, -1 = antisymmetric, ~0 for a random bilinear form.
  Writing G = S + A (symmetric and antisymmetric parts, off the diagonal), it is
  (var S - var A) / (var S + var A) once the means are removed.
"""

import numpy as np
import torch

DOT_PRODUCT = "dot product <PE_x, PE_y>"
ATTENTION_LOGITS = "attention logits s (PE_x W_Q^h) . (PE_y W_K^h) of head h in layer 0"


def gram(table: torch.Tensor) -> np.ndarray:
    t = table.to(torch.float64)
    return (t @ t.T).numpy()


def attention_logits(table: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, heads: int,
                     scaling: float) -> np.ndarray:
    """``(H, N, N)``: ``scaling * (P W_q^h^T)(P W_k^h^T)^T`` per head, for fairseq's projection
    weights ``w_q``, ``w_k`` ``(D_out, D)`` (``q = x @ w_q.T``; head h owns output rows
    ``h*d_h .. (h+1)*d_h - 1``). Biases are left out: they add terms that depend on one position
    only (and a constant), not on the pair."""
    t = table.to(torch.float64)
    out_dim = w_q.size(0)
    if out_dim % heads or w_k.shape != w_q.shape or w_q.size(1) != t.size(1):
        raise ValueError(f"attention weights {tuple(w_q.shape)} / {tuple(w_k.shape)} do not fit {heads} heads "
                         f"over a table of width {t.size(1)}")
    head_dim = out_dim // heads
    q = (t @ w_q.to(torch.float64).T).view(t.size(0), heads, head_dim).transpose(0, 1)  # (H, N, d_h)
    k = (t @ w_k.to(torch.float64).T).view(t.size(0), heads, head_dim).transpose(0, 1)
    return (scaling * q @ k.transpose(1, 2)).numpy()


def offset_profile(g: np.ndarray) -> dict:
    """Mean, min and max of phi(x, x+m) over x for each offset m = 0..N-1."""
    n = g.shape[0]
    mean, lo, hi = [], [], []
    for m in range(n):
        d = np.diagonal(g, m)
        mean.append(float(d.mean()))
        lo.append(float(d.min()))
        hi.append(float(d.max()))
    return {"offsets": list(range(n)), "mean": mean, "min": lo, "max": hi}


def translation_invariance(g: np.ndarray) -> float:
    n = g.shape[0]
    values, within = [], 0.0
    for m in [*range(1, n), *range(-(n - 1), 0)]:  # every signed offset y - x != 0
        d = np.diagonal(g, m)
        within += float(((d - d.mean()) ** 2).sum())
        values.append(d)
    if not values:
        return float("nan")
    allv = np.concatenate(values)
    total = float(((allv - allv.mean()) ** 2).sum())
    if total == 0.0:
        return float("nan")
    return 1.0 - within / total


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks (1-based) with ties averaged, as Spearman's rho needs (scipy's ``rankdata``)."""
    sorter = np.argsort(a, kind="mergesort")
    inv = np.empty(len(a), dtype=np.intp)
    inv[sorter] = np.arange(len(a))
    a_sorted = a[sorter]
    first = np.r_[True, a_sorted[1:] != a_sorted[:-1]]
    dense = first.cumsum()[inv]
    bounds = np.r_[np.nonzero(first)[0], len(a)]
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    den = np.sqrt((rx**2).sum() * (ry**2).sum())
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


def monotonicity(g: np.ndarray, window=None) -> dict:
    """Mean over anchors of -Spearman(offset, phi) forward and backward (offsets up to
    ``window``, all by default)."""
    n = g.shape[0]
    fwd, bwd = [], []
    for x in range(n):
        ahead = g[x, x + 1 : n if window is None else min(n, x + 1 + window)]
        if len(ahead) >= 3:
            fwd.append(-_spearman(np.arange(1, len(ahead) + 1, dtype=np.float64), ahead))
        behind = g[x, max(0, x - (n if window is None else window)) : x][::-1]
        if len(behind) >= 3:
            bwd.append(-_spearman(np.arange(1, len(behind) + 1, dtype=np.float64), behind))
    f = float(np.nanmean(fwd)) if fwd else float("nan")
    b = float(np.nanmean(bwd)) if bwd else float("nan")
    return {"forward": f, "backward": b, "both": (f + b) / 2}


def pairwise_symmetry(g: np.ndarray) -> float:
    """Pearson correlation of phi(x, y) and phi(y, x) over ordered pairs x != y."""
    off = ~np.eye(g.shape[0], dtype=bool)
    a, b = g[off], g.T[off]
    if a.size < 2 or a.std() == 0:
        return 1.0 if np.array_equal(a, b) else float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def monotone_range(profile) -> int:
    """The largest offset M such that ``profile[0] > profile[1] > ... > profile[M]`` (for a
    translation-invariant proximity, phi as a function of the offset: how far monotonicity holds
    exactly)."""
    p = np.asarray(profile, dtype=np.float64)
    rises = np.nonzero(np.diff(p) >= 0)[0]
    return int(rises[0]) if rises.size else len(p) - 1


def proximity_properties(g: np.ndarray, proximity: str) -> dict:
    """The indicators of one proximity matrix, named after ``proximity``."""
    n = g.shape[0]
    mono = monotonicity(g)
    local = monotonicity(g, window=min(16, n - 1))
    return {
        "proximity": proximity,
        "translation_invariance": translation_invariance(g),
        "monotonicity": mono["both"],
        "monotonicity_forward": mono["forward"],
        "monotonicity_backward": mono["backward"],
        "monotonicity_local16": local["both"],
        "symmetry": pairwise_symmetry(g),
        "symmetry_max_abs_error": float(np.abs(g - g.T).max()),
    }


def dot_product_properties(table: torch.Tensor) -> dict:
    """The indicators of <PE_x, PE_y>; its symmetry holds by construction and says so."""
    props = proximity_properties(gram(table), DOT_PRODUCT)
    props["symmetry_holds_by_construction"] = True
    return props


def attention_logit_properties(table: torch.Tensor, w_q, w_k, heads: int, scaling: float) -> dict:
    """``(report, logits)``: the indicators of each head's attention-logit proximity and their
    mean over heads; the ``(H, N, N)`` logits themselves for the figures."""
    logits = attention_logits(table, w_q, w_k, heads, scaling)
    per_head = []
    for h, g in enumerate(logits):
        props = proximity_properties(g, ATTENTION_LOGITS.replace("head h", f"head {h}"))
        props.update({"head": h, "logit_min": float(g.min()), "logit_max": float(g.max())})
        per_head.append(props)
    keys = ("translation_invariance", "monotonicity", "monotonicity_local16", "symmetry")
    mean = {k: float(np.nanmean([p[k] for p in per_head])) for k in keys}
    return {"proximity": ATTENTION_LOGITS, "layer": 0, "heads": heads, "scaling": scaling,
            "biases": "left out (they add terms of one position only)", "mean_over_heads": mean,
            "per_head": per_head}, logits


__all__ = [
    "ATTENTION_LOGITS",
    "DOT_PRODUCT",
    "attention_logit_properties",
    "attention_logits",
    "dot_product_properties",
    "gram",
    "monotone_range",
    "monotonicity",
    "offset_profile",
    "pairwise_symmetry",
    "proximity_properties",
    "translation_invariance",
]
