"""Power planning for the verdict's test (``posenc.report.verdict``), from a sweep's own variance
components: how small a difference the row's seeds and test set can detect (``mde``), and how
many seeds a given difference needs on a test set of another size (``seeds_needed``).

A per-seed difference d_s = δ + c + e_s + u_s: c the test set's sampling of sentences that every
seed shares (variance ``shared_var``), e_s the sentence noise that differs from seed to seed
(``sentence_var``), u_s the seed's own effect (``seed_var``). The test's two variance estimates
see them as s_d² ≈ seed_var + sentence_var, and the delta-method variance over sentences as
shared_var + sentence_var / n (mean over seeds) and shared_var + sentence_var (one seed); that
separates the three (``verdict.SeedTest``). At M sentences instead
of this test set's N, the two sentence parts scale by N/M (their sd by the square root), the
seeds' own part does not. The power is that of the test as it runs: Δ normal around δ, s_d² a
scaled chi-square with n - 1 degrees of freedom, rejection beyond t(0.975, n - 1)·se.
"""

import math
from dataclasses import dataclass

import numpy as np

from posenc.report.verdict import ALPHA

POWER = 0.8
DEFAULT_EFFECT = 0.5       # BLEU: the paper's largest gap between placements (Table 4: 0.5)
MAX_SEEDS = 1000
_QUANTILES = (np.arange(400) + 0.5) / 400   # where the chi-square of s_d² is integrated


@dataclass(frozen=True)
class Components:
    seed_var: float        # the seeds' own effect on d_s
    sentence_var: float    # sentence noise of one seed's d_s that differs between seeds, at N sentences
    shared_var: float      # test-set sampling shared by every seed, at N sentences
    sentences: int         # N

    @classmethod
    def of(cls, test) -> "Components":
        """From a ``verdict.SeedTest`` (two or more seeds)."""
        return cls(max(test.sd_diff ** 2 - test.sentence_var, 0.0), test.sentence_var, test.shared_var, test.sentences)

    def at(self, sentences: int = None) -> tuple:
        """``(variance of d_s over seeds, shared variance)`` on a test set of ``sentences``."""
        scale = self.sentences / (sentences or self.sentences)
        return self.seed_var + self.sentence_var * scale, self.shared_var * scale


def power(effect: float, seeds: int, components: Components, sentences: int = None, alpha: float = ALPHA) -> float:
    """Probability that the verdict's test finds ``effect`` (two-sided, level ``alpha``)."""
    from scipy import stats as scipy_stats  # 1-2 s to import: paid by --power, not by every start-up

    if seeds < 2:
        return 0.0
    spread, shared = components.at(sentences)
    df = seeds - 1
    critical = scipy_stats.t.ppf(1 - alpha / 2, df)
    truth = math.sqrt(shared + spread / seeds)                  # sd of Δ
    if truth == 0:
        return 1.0 if effect else 0.0
    s2 = spread * scipy_stats.chi2.ppf(_QUANTILES, df) / df     # s_d² as the test will see it
    se = np.sqrt(s2 / seeds + shared)
    reject = scipy_stats.norm.sf((critical * se - abs(effect)) / truth) + \
        scipy_stats.norm.cdf((-critical * se - abs(effect)) / truth)
    return float(reject.mean())


def mde(seeds: int, components: Components, sentences: int = None, target: float = POWER) -> float:
    """The smallest |Δ| the test finds with probability ``target`` at these seeds and sentences."""
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


def seeds_needed(effect: float, components: Components, sentences: int = None, target: float = POWER):
    """The fewest seeds (>= 2) with power ``target`` for ``effect``; None when even MAX_SEEDS do not
    reach it (the shared test-set part does not shrink with seeds: only more sentences help)."""
    if power(effect, MAX_SEEDS, components, sentences) < target:
        return None
    low, high = 2, MAX_SEEDS          # power grows with the seeds: bisect
    while low < high:
        mid = (low + high) // 2
        if power(effect, mid, components, sentences) >= target:
            high = mid
        else:
            low = mid + 1
    return low
