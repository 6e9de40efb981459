"""Power planning for the verdict's test (``posenc.stats.verdict``), from a pilot sweep's own
variance components: how small a difference the row's seeds and test set can detect (``mde``),
and how many seeds to book for a given difference on a test set of another size (``booking``).

A per-seed difference d_s = δ + c + e_s + u_s: c the test set's sampling of sentences that every
seed shares (variance ``shared_var``), e_s the sentence noise that differs from seed to seed
(``sentence_var``), u_s the seed's own effect (seed_var). The pilot sees s_d² ≈ seed_var +
sentence_var over its n seeds (``spread_var``, n - 1 degrees of freedom), and the delta-method
variance over sentences, which separates the other two (``verdict.SeedTest``). At M sentences
instead of this test set's N the two sentence parts scale by N/M; the seeds' own part does not.

The power is that of the test as it runs: Δ normal around δ, s_d² a scaled chi-square with n - 1
df, rejection beyond t(0.975, df)·se with the guarded Welch-Satterthwaite df of each s_d².

The pilot's s_d² is itself uncertain: from 3 seeds its 95% range is 0.03 to 3.7 times the truth,
and the seeds' own part (s_d² minus the sentence part) comes out as zero in about half of such
pilots where it equals the sentence part. A plan that takes the pilot at its word (the plug-in,
``seeds_needed_low``) is optimistic exactly where users extrapolate to a larger test set, since
the seeds' part is the one that more sentences do not shrink. The number to book plans with s_d²
at its one-sided ``PLAN_LEVEL`` (75%) upper confidence limit from the pilot (Browne 1995). The
level was chosen by simulating pilots and the seeds they book (scripts/calibrate_significance.py,
results/significance_calibration.md): in normal theory 70% is the lowest that delivers a mean
power of 0.78 or more for 3- and 5-seed pilots, at the pilot's own test size and at 3 and 6 times
it, with the seeds' part 0, equal to and 4 times the sentence part; on real text the sweeps the
bookings buy deliver about 0.02 less than normal theory says, so 75%. Assurance over a flat prior
on the variance was also tried: it over-books up to 14 times the truth's plan where the seeds'
part is 0.

The limit is taken of the larger of s_d² and the sentence part (``Components.upper``, issue 30):
where a pilot's seeds agree by chance, the limit of s_d² itself can stay under the sentence part,
planning a seeds' part of 0 that a larger test set does not cover. In the held-out check (3-seed
pilots on 500 sentences planned for 2,000, the truth needing 11 seeds) 9-12% of the pilots booked
plans with power under 0.5 where the seeds' part was real; with the larger of the two, none, at
2 more seeds at the median where the seeds' part equals the sentence part and 55 more where it is
0 (results/significance_calibration.md).
"""

import math
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from posenc.stats.verdict import ALPHA, degrees_of_freedom, guard_factor

POWER = 0.8
DEFAULT_EFFECT = 0.5       # BLEU: the paper's largest gap between placements (Table 4: 0.5)
MAX_SEEDS = 1000
PLAN_LEVEL = 0.75          # the booking's one-sided upper confidence level for the pilot's s_d²
WIDE = 2                   # a booking more than this many times the plug-in: the pilot cannot pin it down
_QUANTILES = (np.arange(200) + 0.5) / 200   # where the chi-square of s_d² is integrated


@dataclass(frozen=True)
class Components:
    """One pilot's components (floats), or many pilots' (arrays of one shape)."""
    spread_var: float      # s_d²: the pilot's variance of d_s over seeds (seed_var + sentence_var), at N
    sentence_var: float    # sentence noise of one seed's d_s that differs between seeds, at N sentences
    shared_var: float      # test-set sampling shared by every seed, at N sentences
    sentences: int         # N
    pilot_seeds: int = 0   # n: s_d² has n - 1 degrees of freedom (0: taken as known)

    @classmethod
    def of(cls, test) -> "Components":
        """From a ``verdict.SeedTest`` (two or more seeds)."""
        return cls(test.sd_diff ** 2, test.sentence_var, test.shared_var, test.sentences, test.n)

    @property
    def seed_var(self) -> float:
        """The seeds' own part as the pilot shows it (the plug-in: cut to 0 where s_d² falls short)."""
        return np.maximum(self.spread_var - self.sentence_var, 0.0)

    def upper(self, level: float = PLAN_LEVEL, cover: bool = True) -> "Components":
        """The same with s_d² at its one-sided ``level`` upper confidence limit. s_d² estimates
        seed_var + sentence_var, which is never below the sentence part (measured from every
        sentence): an s_d² under it says only that the seeds agreed by chance, and its own limit can
        stay under it too (a seeds' part of 0, which more sentences cannot cover). So the limit is
        taken of the larger of s_d² and the sentence part (issue 30, item 8). ``cover=False``: of
        s_d² as it is, floored at the sentence part (the booking before that; the calibration's
        comparison)."""
        from scipy import stats as scipy_stats

        df = self.pilot_seeds - 1
        if df < 1:
            return self
        factor = df / float(scipy_stats.chi2.ppf(1 - level, df))
        if not cover:
            return replace(self, spread_var=np.maximum(self.spread_var * factor, self.sentence_var))
        return replace(self, spread_var=np.maximum(self.spread_var, self.sentence_var) * factor)

    def at(self, sentences: int = None) -> tuple:
        """``(variance of d_s over seeds, shared variance)`` on a test set of ``sentences``."""
        scale = self.sentences / (sentences or self.sentences)
        return self.seed_var + self.sentence_var * scale, self.shared_var * scale


@cache
def _t_table():
    from scipy import stats as scipy_stats

    df = np.exp(np.linspace(0.0, math.log(1e7), 4000))
    return np.log(df), scipy_stats.t.ppf(1 - ALPHA / 2, df)


def t_critical(df) -> np.ndarray:
    """t(0.975, df) for arrays of (fractional) df, interpolated in log df (within 1e-5 of scipy's)."""
    log_df, table = _t_table()
    return np.interp(np.log(np.maximum(df, 1.0)), log_df, table)


@cache
def _chi2_table():
    """chi2.ppf(_QUANTILES, df) / df for whole df below MAX_SEEDS (row df): the plans of the
    adaptive calibration evaluate it at every look of thousands of rows."""
    from scipy import stats as scipy_stats

    df = np.maximum(np.arange(MAX_SEEDS), 1)[:, None]
    return scipy_stats.chi2.ppf(_QUANTILES, df) / df


def power_of(effect, seeds, spread, shared, sentences) -> np.ndarray:
    """The test's power for arrays that broadcast: ``seeds`` paired seeds, d_s variance ``spread``
    and shared variance ``shared`` at ``sentences`` test sentences."""
    from scipy import stats as scipy_stats

    seeds, spread, shared = (np.asarray(x, dtype=float)[..., None] for x in (seeds, spread, shared))
    df = np.maximum(seeds - 1, 1)
    whole = np.all((df == np.round(df)) & (df < MAX_SEEDS))
    ratio = _chi2_table()[df[..., 0].astype(int)] if whole else scipy_stats.chi2.ppf(_QUANTILES, df) / df
    s2 = spread * ratio                                           # s_d² as the test will see it
    se = np.sqrt(s2 / seeds + shared)
    critical = t_critical(degrees_of_freedom(s2 / seeds, shared, seeds, sentences, guard_factor(seeds)))
    truth = np.sqrt(shared + spread / seeds)                      # sd of Δ
    with np.errstate(divide="ignore", invalid="ignore"):
        reject = scipy_stats.norm.sf((critical * se - abs(effect)) / truth) + \
            scipy_stats.norm.cdf((-critical * se - abs(effect)) / truth)
    reject = np.where(truth > 0, reject, 1.0 if effect else 0.0)
    return np.where(seeds >= 2, reject, 0.0).mean(-1)


def power(effect: float, seeds: int, components: Components, sentences: int = None) -> float:
    """Probability that the verdict's test finds ``effect`` (two-sided, level ALPHA)."""
    spread, shared = components.at(sentences)
    return float(power_of(effect, seeds, spread, shared, sentences or components.sentences))


def plan(effect, spread, shared, sentences, target: float = POWER) -> np.ndarray:
    """The fewest seeds (>= 2) with power ``target`` for each element of the arrays ``spread`` and
    ``shared`` (at ``sentences``); -1 where even MAX_SEEDS do not reach it. Bisection, vectorised."""
    spread, shared = np.broadcast_arrays(np.asarray(spread, dtype=float), np.asarray(shared, dtype=float))
    low, high = np.full(spread.shape, 2), np.full(spread.shape, MAX_SEEDS)
    reached = power_of(effect, high, spread, shared, sentences) >= target
    while np.any(low < high):
        mid = (low + high) // 2
        good = power_of(effect, mid, spread, shared, sentences) >= target
        high, low = np.where(good, mid, high), np.where(good, low, np.minimum(mid + 1, high))
    return np.where(reached, high, -1)


def needed(effect: float, components: Components, sentences: int = None, target: float = POWER) -> np.ndarray:
    """``seeds_needed`` for many pilots' components (arrays) at once: -1 where it says None."""
    spread, shared = components.at(sentences)
    return plan(effect, spread, shared, sentences or components.sentences, target)


def seeds_needed(effect: float, components: Components, sentences: int = None, target: float = POWER):
    """The plug-in plan: the fewest seeds with power ``target`` if the pilot's components were the
    truth; None when even MAX_SEEDS do not reach it."""
    seeds = int(needed(effect, components, sentences, target))
    return None if seeds < 0 else seeds


def booking(effect: float, components: Components, sentences: int = None, target: float = POWER):
    """The seeds to book: the plan with the pilot's s_d² at its PLAN_LEVEL upper limit; None as
    ``seeds_needed``."""
    return seeds_needed(effect, components.upper(), sentences, target)


def mde(seeds: int, components: Components, sentences: int = None, target: float = POWER) -> float:
    """The smallest |Δ| the test finds with probability ``target`` at these seeds and sentences
    (the pilot's components taken as they are)."""
    from scipy import optimize

    if seeds < 2:
        return math.inf
    spread, shared = components.at(sentences)
    scale = math.sqrt(shared + spread / seeds)
    if scale == 0:
        return 0.0
    return float(optimize.brentq(lambda d: power(d, seeds, components, sentences) - target, 0.0, 1000 * scale))


def reachable(effect: float, components: Components, sentences: int = None, target: float = POWER) -> bool:
    """Whether any number of seeds reaches ``target``: with endless seeds se² falls to the shared
    test-set part, which only more test sentences shrink."""
    from scipy import stats as scipy_stats

    shared = components.at(sentences)[1]
    if shared == 0:
        return True
    z = scipy_stats.norm.ppf(1 - ALPHA / 2)
    sd = math.sqrt(shared)
    return float(scipy_stats.norm.sf(z - abs(effect) / sd) + scipy_stats.norm.cdf(-z - abs(effect) / sd)) > target


@dataclass(frozen=True)
class SeedsPlan:
    """A plan as a value for the report to format: the seeds it books, or None where no number up
    to MAX_SEEDS reaches the power, and whether any number would (False: the test set's own
    sampling caps the power, whatever the seeds)."""
    seeds: int = None
    reachable: bool = True


def seeds_plan(effect: float, components: Components, sentences: int = None, target: float = POWER,
               book: bool = True) -> SeedsPlan:
    """The booking (``book``) or the plug-in plan as a ``SeedsPlan``."""
    seeds = (booking if book else seeds_needed)(effect, components, sentences, target)
    if seeds is not None:
        return SeedsPlan(seeds)
    return SeedsPlan(None, reachable(effect, components, sentences, target))
