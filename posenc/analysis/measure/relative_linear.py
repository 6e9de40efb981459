"""Exercise 3.1: relative positions are linear in the sinusoid.

For one frequency w and angle a = p w, b = k w, the angle-addition formulas give

    [sin(a + b)]   [ cos b   sin b] [sin a]
    [cos(a + b)] = [-sin b   cos b] [cos a]

so PE(p + k) = M(k) PE(p) with M(k) block-diagonal: one 2x2 rotation per sin/cos pair, depending
on k alone. Consequently PE(p + k) - PE(p) = (M(k) - I) PE(p): a k-only matrix A(k) = M(k) - I
times a p-only vector B(p) = PE(p) (the seed's "A depends on k only, B on p only").

Everything here works in the dtype of the table it is given, so the float32 error is that of a
float32 table and float32 rotations.
"""

import torch

from posenc.encodings.defaults import SINUSOID_BASE
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, sinusoid_frequencies


def check_variant(variant: str) -> None:
    if variant not in SINUSOID_VARIANTS:
        raise ValueError(f"unknown sinusoid variant {variant!r}; allowed: {', '.join(SINUSOID_VARIANTS)}")


def pair_columns(dim: int, variant: str):
    """Column indices ``(sin_cols, cos_cols)``, each ``(D // 2,)``, of the sin/cos pair of every
    frequency (highest frequency first): interleaved for ``paper``, halves for ``fairseq``."""
    check_variant(variant)
    half = dim // 2
    i = torch.arange(half)
    if variant == "paper":
        return 2 * i, 2 * i + 1
    return i, half + i


def _cos_sin(ks: torch.Tensor, dim: int, variant: str, dtype, base: float):
    freqs = sinusoid_frequencies(dim, variant, dtype=dtype, base=base)
    angles = ks.to(dtype)[:, None] * freqs[None, :]  # (K, D/2)
    return torch.cos(angles), torch.sin(angles)


def shift_matrix(k: int, dim: int, variant: str = "paper", dtype=torch.float64,
                 base: float = SINUSOID_BASE) -> torch.Tensor:
    """The closed-form ``(D, D)`` matrix M(k) with PE(p + k) = M(k) PE(p) for every p.

    An odd ``D`` (whose last column is zero) gets a zero last row and column."""
    c, s = _cos_sin(torch.tensor([k]), dim, variant, dtype, base)
    c, s = c[0], s[0]
    si, ci = pair_columns(dim, variant)
    m = torch.zeros(dim, dim, dtype=dtype)
    m[si, si] = c
    m[si, ci] = s
    m[ci, si] = -s
    m[ci, ci] = c
    return m


def _split_pairs(rows: torch.Tensor, variant: str):
    """Views ``(sin_part, cos_part)``, each ``(P, D // 2)``, of the even-width part of ``rows``."""
    p, dim = rows.shape
    half = dim // 2
    body = rows[:, : 2 * half]
    if variant == "paper":
        pairs = body.reshape(p, half, 2)
        return pairs[..., 0], pairs[..., 1]
    return body[:, :half], body[:, half:]


def apply_shift(rows: torch.Tensor, k: int, variant: str, base: float = SINUSOID_BASE) -> torch.Tensor:
    """M(k) applied to each row of ``rows`` ``(P, D)``, pair by pair (same result as
    ``rows @ shift_matrix(k).T`` without the dense ``D x D`` product)."""
    check_variant(variant)
    dim = rows.size(1)
    c, s = _cos_sin(torch.tensor([k]), dim, variant, rows.dtype, base)
    sin_part, cos_part = _split_pairs(rows, variant)
    new_sin = sin_part * c + cos_part * s
    new_cos = cos_part * c - sin_part * s
    if variant == "paper":
        out = torch.stack([new_sin, new_cos], dim=-1).flatten(1)
    else:
        out = torch.cat([new_sin, new_cos], dim=1)
    if dim % 2:
        out = torch.cat([out, torch.zeros_like(rows[:, -1:])], dim=1)
    return out


def relative_linear_errors(table: torch.Tensor, variant: str, chunk=None, base: float = SINUSOID_BASE) -> dict:
    """Largest ``|PE(p + k) - M(k) PE(p)|`` over all entries and all ``p, k >= 0`` with
    ``p + k < N`` (negative offsets are the same check with M(-k) = M(k)^T).

    Returns ``max_error``, the offset where it occurs (``worst_k``), the number of ``(p, k)``
    pairs checked, and ``per_k`` (the largest error at each offset k = 0..N-1, for plotting).
    Computed ``chunk`` positions at a time against all offsets (default: ~16M elements per
    temporary), in the table's dtype.
    """
    check_variant(variant)
    n, dim = table.shape
    chunk = chunk or max(1, (1 << 24) // (n * max(dim // 2, 1)))
    sin_t, cos_t = _split_pairs(table, variant)  # (N, D/2) each
    ck, sk = _cos_sin(torch.arange(n), dim, variant, table.dtype, base)  # (N, D/2): offsets 0..N-1
    per_k = torch.zeros(n, dtype=torch.float64)
    for p0 in range(0, n, chunk):
        p = torch.arange(p0, min(p0 + chunk, n))
        ks = torch.arange(n - p0)
        target = p[:, None] + ks[None, :]  # (P, K)
        valid = target < n
        target = target.clamp(max=n - 1)
        s_p, c_p = sin_t[p][:, None, :], cos_t[p][:, None, :]
        c_k, s_k = ck[: n - p0][None], sk[: n - p0][None]
        err_s = (sin_t[target] - (s_p * c_k + c_p * s_k)).abs().amax(-1)
        err_c = (cos_t[target] - (c_p * c_k - s_p * s_k)).abs().amax(-1)
        err = torch.maximum(err_s, err_c).to(torch.float64).masked_fill(~valid, 0.0).amax(0)
        per_k[: n - p0] = torch.maximum(per_k[: n - p0], err)
    worst = int(per_k.argmax())
    return {"max_error": float(per_k[worst]), "worst_k": worst, "pairs_checked": n * (n + 1) // 2,
            "ks": list(range(n)), "per_k": per_k.tolist()}


def fit_shift_lstsq(table: torch.Tensor, k: int, variant: str, base: float = SINUSOID_BASE) -> dict:
    """Fit M(k) from the table alone, by least squares on PE(p + k) ~ M PE(p), and compare it
    with the closed form.

    Two fits, both in float64:

    * ``full``: an unconstrained ``D x D`` matrix (minimum-norm solution). It is determined only
      where the table has full column rank; the low-frequency columns of a short table are nearly
      polynomial in p and hence nearly dependent, so the report gives the rank and condition
      number with the difference.
    * ``block``: one free 2x2 matrix per sin/cos pair (the structure the closed form has, not
      its values), which every table of at least 3 rows determines.
    """
    x = table[: table.size(0) - k].to(torch.float64)
    y = table[k:].to(torch.float64)
    dim = table.size(1)
    closed = shift_matrix(k, dim, variant, torch.float64, base)

    sol = torch.linalg.lstsq(x, y, driver="gelsd").solution  # (D, D) = M^T
    fitted = sol.T
    svals = torch.linalg.svdvals(x)
    tol = svals.max() * max(x.shape) * torch.finfo(torch.float64).eps
    rank = int((svals > tol).sum())
    full = {
        "residual_max": float((x @ fitted.T - y).abs().max()),
        "max_abs_diff_from_closed_form": float((fitted - closed).abs().max()),
        "table_rank": rank,
        "condition_number": float(svals.max() / svals.min()) if float(svals.min()) > 0 else float("inf"),
        "identifiable": rank == dim,
    }

    si, ci = pair_columns(dim, variant)
    xb = torch.stack([x[:, si], x[:, ci]], dim=-1).transpose(0, 1)  # (D/2, P, 2)
    yb = torch.stack([y[:, si], y[:, ci]], dim=-1).transpose(0, 1)
    blocks = torch.linalg.lstsq(xb, yb, driver="gelsd").solution.transpose(1, 2)  # (D/2, 2, 2) = M_i
    closed_blocks = torch.stack(
        [torch.stack([closed[si, si], closed[si, ci]], -1), torch.stack([closed[ci, si], closed[ci, ci]], -1)], 1
    )
    block = {
        "max_abs_diff_from_closed_form": float((blocks - closed_blocks).abs().max()),
        "residual_max": float((torch.einsum("ipj,iqj->ipq", xb, blocks) - yb).abs().max()),
    }
    return {"k": k, "full": full, "block": block, "fitted_full": fitted, "fitted_blocks": blocks}


def factorisation_check(table: torch.Tensor, variant: str, max_k: int = 32, base: float = SINUSOID_BASE) -> dict:
    """PE(p + k) - PE(p) = A(k) B(p) with A(k) = M(k) - I (k only) and B(p) = PE(p) (p only).

    ``max_error``: largest deviation of the differences from that product, over k = 1..max_k and
    all p. ``rank2_residual``: a data-only view of the same fact. For each sin/cos pair the
    ``(2K, P)`` matrix of differences (rows: offset and component, columns: position) is a product
    of a k-only ``(2K, 2)`` and a p-only ``(2, P)`` factor, so it has rank 2; the largest
    ``sigma_3 / sigma_1`` over the pairs is ~1e-15 for a sinusoid and O(1) for a table without
    the structure.
    """
    n, dim = table.shape
    max_k = max(1, min(max_k, n // 2))
    ks = torch.arange(1, max_k + 1)
    positions = n - max_k
    first = table[:positions]
    diffs = torch.stack([table[k : k + positions] - first for k in ks.tolist()])  # (K, P, D)
    worst = 0.0
    for j, k in enumerate(ks.tolist()):
        # A(k) B(p) = (M(k) - I) PE(p), applied pair by pair (apply_shift is M(k) without the
        # dense D x D product; the tests check the two agree).
        worst = max(worst, float((diffs[j] - (apply_shift(first, k, variant, base) - first)).abs().max()))
    si, ci = pair_columns(dim, variant)
    per_pair = torch.stack([diffs[:, :, si], diffs[:, :, ci]], dim=1)  # (K, 2, P, D/2)
    mats = per_pair.permute(3, 0, 1, 2).reshape(dim // 2, 2 * max_k, positions).to(torch.float64)
    sv = torch.linalg.svdvals(mats)  # (D/2, min(2K, P))
    ratio = (sv[:, 2] / sv[:, 0].clamp_min(1e-300)) if sv.size(1) > 2 else torch.zeros(dim // 2)
    return {"max_k": max_k, "max_error": worst, "rank2_residual": float(ratio.max())}


__all__ = [
    "apply_shift",
    "check_variant",
    "factorisation_check",
    "fit_shift_lstsq",
    "pair_columns",
    "relative_linear_errors",
    "shift_matrix",
]
