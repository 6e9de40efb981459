"""Across-seed arithmetic: mean, sample standard deviation and the 95% t-interval of a mean."""

import math
import statistics

# Two-sided 95% quantiles of Student's t, t(0.975, df), for df = 1..30 (tabulated to 4 decimals;
# the tests check them against scipy). Beyond 30 the Cornish-Fisher series below is within 1e-4.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """t(0.975, df): the multiplier of the standard error in a 95% interval of a mean."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def mean_sd(values):
    """``(mean, sample sd)`` of the values that are not None; ``(None, None)`` when there are none.
    One value has sd 0.0 (nothing to spread)."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def ci95(values):
    """The 95% confidence interval of the mean, ``(low, high)``: mean ± t(0.975, n-1) sd / sqrt(n).
    None below two values: one seed says nothing about the spread between seeds."""
    values = [float(v) for v in values if v is not None]
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    half = t975(len(values) - 1) * sd / math.sqrt(len(values))
    return mean - half, mean + half
