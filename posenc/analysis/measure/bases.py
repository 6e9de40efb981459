"""What the base of the sinusoid does (exercise 3.3's "what does the scale 10000 do?").

The base b fixes the frequencies w_i = b^(-2i/D) (``paper``) or b^(-i/(D/2-1)) (``fairseq``):
the wavelengths 2*pi/w_i run from 2*pi (every base) up to ~2*pi*b. For each base this measures,
on rows PE(0)..PE(N-1):

* the range of wavelengths, and how many sin/cos pairs have a wavelength beyond N (they never
  complete a period inside the table: nearly constant, or nearly linear, columns);
* how far monotonicity holds: the proximity <PE_x, PE_{x+m}> = f(m) = sum_i cos(m w_i) depends
  on the offset alone; ``monotone_up_to`` is the largest M with f(0) > f(1) > ... > f(M), next to
  the Spearman indicators over all offsets and over offsets <= 16;
* the probes' errors (absolute position, relative order on held-out positions);
* exercise 3.1's error max |PE(p+k) - M(k) PE(p)| with a float32 table (in float64 it is ~1e-13
  for every base; ``posenc-pe sinusoidal --base B`` reports both).
"""

import math

import torch

from posenc.analysis.measure import probes as probes_mod
from posenc.analysis.measure.periods import sinusoid_wavelengths
from posenc.analysis.measure.properties import DOT_PRODUCT, gram, monotone_range, monotonicity
from posenc.analysis.measure.relative_linear import relative_linear_errors
from posenc.encodings.sinusoidal import sinusoid_frequencies, sinusoid_table

DEFAULT_BASES = (10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0)


def offset_proximity(dim: int, max_len: int, variant: str, base: float) -> torch.Tensor:
    """f(m) = sum_i cos(m w_i) for m = 0..N-1 (float64): <PE_x, PE_{x+m}> at every x."""
    w = sinusoid_frequencies(dim, variant, dtype=torch.float64, base=base)
    return torch.cos(torch.arange(max_len, dtype=torch.float64)[:, None] * w[None, :]).sum(1)


def measure_base(dim: int, max_len: int, variant: str, base: float, *, run_probes: bool = True, folds: int = 5,
                 seed: int = 0):
    """``(row, extras)``: the measurements of one base and the curves its figure needs."""
    t64 = sinusoid_table(max_len, dim, variant, dtype=torch.float64, base=base)
    t32 = sinusoid_table(max_len, dim, variant, dtype=torch.float32, base=base)
    wl = sinusoid_wavelengths(dim, variant, base=base)[: 2 * (dim // 2)]
    pair_wl = 2 * math.pi / sinusoid_frequencies(dim, variant, dtype=torch.float64, base=base)  # pair i, fastest first
    profile = offset_proximity(dim, max_len, variant, base)
    g = gram(t64)
    mono = monotonicity(g)
    local = monotonicity(g, window=min(16, max_len - 1))
    rel32 = relative_linear_errors(t32, variant, base=base)
    row = {
        "base": base,
        "wavelength_min": float(wl.min()),
        "wavelength_max": float(wl.max()),
        "pairs": int(dim // 2),
        "pairs_longer_than_table": int((pair_wl > max_len).sum()),
        "monotone_up_to": monotone_range(profile.numpy()),
        "monotonicity": mono["both"],
        "monotonicity_local16": local["both"],
        "relative_error_float32": rel32["max_error"],
        "relative_error_worst_k": rel32["worst_k"],
    }
    if run_probes and max_len >= 2 * folds:
        found = probes_mod.probes(t64, folds=folds, seed=seed)
        row.update({"absolute_position_mae": found["absolute_position"]["mae"],
                    "absolute_position_chance_mae": found["absolute_position"]["chance_mae"],
                    "relative_order_error": found["relative_order"]["error"]})
    extras = {"profile": profile, "pair_wavelengths": pair_wl, "relative_per_k_float32": rel32["per_k"]}
    return row, extras


def bases_report(dim: int, max_len: int, variant: str = "paper", bases=DEFAULT_BASES, **kwargs):
    rows, extras = [], {}
    for base in bases:
        row, ex = measure_base(dim, max_len, variant, float(base), **kwargs)
        rows.append(row)
        extras[float(base)] = ex
    report = {
        "tool": "posenc-pe",
        "mode": "bases",
        "variant": variant,
        "dim": dim,
        "max_len": max_len,
        "proximity": DOT_PRODUCT,
        "positions": f"row p is PE(p), p = 0..{max_len - 1}",
        "rows": rows,
        "norm": math.sqrt(dim / 2),  # every base: sqrt(D/2) at every position
    }
    return report, extras


__all__ = ["DEFAULT_BASES", "bases_report", "measure_base", "offset_proximity"]
