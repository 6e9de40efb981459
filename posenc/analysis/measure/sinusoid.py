"""The closed-form sinusoid, both variants: exercises 3.1 to 3.3 plus the table measurements of
:mod:`posenc.analysis.measure.table`, as ``(report, extras)``."""

import math

import torch

from posenc.analysis.measure.periods import sinusoid_wavelengths
from posenc.analysis.measure.relative_linear import factorisation_check, fit_shift_lstsq, relative_linear_errors
from posenc.analysis.measure.table import analyze_table
from posenc.encodings.defaults import SINUSOID_BASE
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, sinusoid_frequencies, sinusoid_table

LSTSQ_KS = (1, 2, 3, 5, 10, 50, 100)


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


__all__ = ["LSTSQ_KS", "analyze_sinusoid", "sinusoid_report"]
