"""Proximity properties of Wang et al., "On Position Embeddings in BERT" (ICLR 2021), for the
dot-product proximity phi(x, y) = <PE_x, PE_y>, as numeric indicators (1 = property holds).

* ``translation_invariance``: the share of the variance of phi(x, y) over all pairs x != y that
  the offset y - x explains, 1 - (within-offset sum of squares) / (total sum of squares).
  Exactly 1 when phi depends on the offset only (the sinusoid: phi(x, x+m) = sum_i cos(m w_i));
  ~0 for a random table.
* ``monotonicity``: proximity falls as the offset grows. For every anchor x, minus Spearman's rank
  correlation between m and phi(x, x+m) over forward offsets m >= 1 (and likewise backward,
  phi(x, x-m)); the mean over anchors with at least 3 offsets, forward and backward averaged.
  1 = strictly decreasing everywhere, ~0 for a random table.
* ``symmetry``: the dot product is symmetric in its arguments by construction
  (``symmetry_pairwise_max_error`` is reported and is 0 up to rounding), so the indicator is the
  direction symmetry around each anchor: Pearson correlation of phi(x, x+m) and phi(x, x-m) over
  all anchors and offsets where both exist. 1 = forward and backward look the same (the
  sinusoid), ~0 for a random table.
"""

import numpy as np
import torch


def gram(table: torch.Tensor) -> np.ndarray:
    t = table.to(torch.float64)
    return (t @ t.T).numpy()


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
    for m in range(1, n):  # g is symmetric: offsets -m duplicate offsets m
        d = np.diagonal(g, m)
        within += float(((d - d.mean()) ** 2).sum())
        values.append(d)
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


def direction_symmetry(g: np.ndarray) -> float:
    n = g.shape[0]
    fwd, bwd = [], []
    for x in range(1, n - 1):
        m = min(x, n - 1 - x)
        fwd.append(g[x, x + 1 : x + m + 1])
        bwd.append(g[x, x - m : x][::-1])
    if not fwd:
        return float("nan")
    f, b = np.concatenate(fwd), np.concatenate(bwd)
    if f.std() == 0 or b.std() == 0:
        return 1.0 if np.array_equal(f, b) else float("nan")
    return float(np.corrcoef(f, b)[0, 1])


def proximity_properties(table: torch.Tensor) -> dict:
    g = gram(table)
    mono = monotonicity(g)
    local = monotonicity(g, window=min(16, table.size(0) - 1))
    return {
        "translation_invariance": translation_invariance(g),
        "monotonicity": mono["both"],
        "monotonicity_forward": mono["forward"],
        "monotonicity_backward": mono["backward"],
        "monotonicity_local16": local["both"],
        "symmetry": direction_symmetry(g),
        "symmetry_pairwise_max_error": float(np.abs(g - g.T).max()),
    }


__all__ = [
    "direction_symmetry",
    "gram",
    "monotonicity",
    "offset_profile",
    "proximity_properties",
    "translation_invariance",
]
