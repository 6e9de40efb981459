"""Power planning for the verdict's test (``posenc.report.verdict``), from a sweep's own variance
components: how small a difference the row's seeds and test set can detect (``mde``), and how
many seeds a given difference needs on a test set of another size (``seeds_needed``).

A per-seed difference d_s varies by the seed's own effect (variance tau²) and by the test set's
sampling of sentences (variance v at this test set's N sentences; the bootstrap measures it). At
M sentences the sentence part is v·N/M (its sd scales with the square root of the size ratio),
the seed part is unchanged. With n seeds, se² = (tau² + v·N/M) / n, and the t-test with n - 1
degrees of freedom rejects with the probability of a noncentral t beyond the critical value.
"""

import math
from dataclasses import dataclass

from scipy import optimize
from scipy import stats as scipy_stats

from posenc.report.verdict import ALPHA

POWER = 0.8
DEFAULT_EFFECT = 0.5       # BLEU: the paper's largest gap between placements (Table 4: 0.5)
MAX_SEEDS = 1000


@dataclass(frozen=True)
class Components:
    seed_var: float        # tau²: variance of d_s from the seeds themselves
    sentence_var: float    # v: variance of one seed's d_s from sampling N test sentences
    sentences: int         # N

    @classmethod
    def of(cls, test) -> "Components":
        """From a ``verdict.SeedTest``: v = n·(bootstrap se)², tau² = s_d² - v (at least 0)."""
        sentence_var = test.n * test.se_bootstrap ** 2
        return cls(max(test.sd_diff ** 2 - sentence_var, 0.0), sentence_var, test.sentences)

    def se(self, seeds: int, sentences: int = None) -> float:
        scale = self.sentences / (sentences or self.sentences)
        return math.sqrt((self.seed_var + self.sentence_var * scale) / seeds)


def power(effect: float, seeds: int, components: Components, sentences: int = None, alpha: float = ALPHA) -> float:
    """Probability that the verdict's test finds ``effect`` (two-sided, level ``alpha``)."""
    if seeds < 2:
        return 0.0
    se = components.se(seeds, sentences)
    if se == 0:
        return 1.0 if effect else alpha
    df = seeds - 1
    critical = scipy_stats.t.ppf(1 - alpha / 2, df)
    ncp = abs(effect) / se
    return float(scipy_stats.nct.sf(critical, df, ncp) + scipy_stats.nct.cdf(-critical, df, ncp))


def mde(seeds: int, components: Components, sentences: int = None, target: float = POWER) -> float:
    """The smallest |Δ| the test finds with probability ``target`` at these seeds and sentences."""
    if seeds < 2:
        return math.inf
    se = components.se(seeds, sentences)
    if se == 0:
        return 0.0
    return float(optimize.brentq(lambda d: power(d, seeds, components, sentences) - target, 0.0, 1000 * se))


def seeds_needed(effect: float, components: Components, sentences: int = None, target: float = POWER):
    """The fewest seeds (>= 2) with power ``target`` for ``effect``; None above MAX_SEEDS."""
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
