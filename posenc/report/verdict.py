"""The verdict of a row against its baseline: a paired t-test over seeds whose variance also covers
the test set's sampling of sentences, Holm's adjustment over the rows sharing a baseline, and the words.

Δ is the table's: the mean over paired seeds of the per-seed corpus-score differences
d_s = score(row, seed s) - score(baseline, seed s). A d_s varies by the seed's own effect, by
sentence noise that differs from seed to seed, and by the test set's sampling of sentences that
every seed shares (a row luckier on these very sentences in every seed). The spread of the d_s
over seeds, s_d, holds the first two; it cannot show the third. So

    se² = s_d² / n + v_shared,   t = Δ / se,   Student's t with n - 1 degrees of freedom,

two-sided. The t with n - 1 degrees of freedom is exact for the seed part (normal d_s), even at
n = 3, when seeds agree closely by chance. v_shared comes from the per-sentence influence of each
seed's output on its corpus score (the delta-method variance, the large-sample value of a
bootstrap over sentences, which tests/test_report_verdict.py checks against a bootstrap): with
one draw of sentences shared by all seeds the variance of Δ is v_test = v_shared + v_seed / n,
and per seed it is v_shared + v_seed, which separates the two. The calibration
(scripts/calibrate_significance.py, results/significance_calibration.md) measured this against
two alternatives (s_d²/n + v_test, and the larger of s_d²/n and v_test) on real text and chose it.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from posenc.report.vector_scores import SCORERS

ALPHA = 0.05
BETTER, WORSE, NO_EVIDENCE = "better", "worse", "no evidence"
# How se² is made. "shared" (the verdict): s_d²/n + the shared part of v_test. "sum": s_d²/n + v_test.
# "max": the larger of s_d²/n and v_test. The calibration measured all three.
COMBINE = ("shared", "sum", "max")


@dataclass(frozen=True)
class SeedTest:
    delta: float          # mean over seeds of d_s
    se: float             # standard error of delta used by the test
    p: float              # two-sided
    ci_low: float         # 95% interval of delta from the same t
    ci_high: float
    n: int                # paired seeds
    sd_diff: float        # s_d: sample sd of the d_s over seeds
    var_test: float       # v_test: variance of delta over test sentences (shared draw)
    var_test_seed: float  # mean over seeds of the variance of one seed's d_s over test sentences
    sentences: int        # test sentences per seed

    @property
    def df(self) -> int:
        return self.n - 1

    @property
    def sentence_var(self) -> float:
        """Sentence noise of one seed's d_s that differs from seed to seed: the per-seed variance
        over sentences exceeds that of the mean over seeds by (1 - 1/n) of it."""
        if self.n < 2:
            return float("nan")
        return max((self.var_test_seed - self.var_test) * self.n / (self.n - 1), 0.0)

    @property
    def shared_var(self) -> float:
        """Sampling of test sentences that every seed shares: what the seeds' spread cannot show."""
        if self.n < 2:
            return self.var_test
        return max(self.var_test - self.sentence_var / self.n, 0.0)


def influence(stats: np.ndarray, options: dict, metric: str) -> np.ndarray:
    """Each sentence's first-order contribution to the corpus score, ``(..., N)``: the gradient of
    the score at the summed statistics (central differences) times the sentence's statistics. The
    variance over sentences of the sum of these, times N, is the bootstrap variance in the limit."""
    score = SCORERS[metric]
    total = stats.sum(-2, dtype=np.float64)                       # (..., k)
    k = total.shape[-1]
    step = np.maximum(1e-4 * np.abs(total), 1e-3)
    eye = np.eye(k)
    up = score(total[..., None, :] + eye * step[..., None, :], options)
    down = score(total[..., None, :] - eye * step[..., None, :], options)
    gradient = (up - down) / (2 * step)                           # (..., k)
    return np.einsum("...nk,...k->...n", stats, gradient)


def seed_test(row_stats, base_stats, options: dict, metric: str = "bleu", combine: str = "shared") -> SeedTest:
    """The test of one row against its baseline. ``row_stats`` and ``base_stats``: per paired seed
    (same order), the per-sentence statistics ``(sentences, k)`` on the same test set."""
    score = SCORERS[metric]
    row = np.stack([np.asarray(s, dtype=np.float64) for s in row_stats])      # (n, N, k)
    base = np.stack([np.asarray(s, dtype=np.float64) for s in base_stats])
    n, sentences, _ = row.shape
    diffs = score(row.sum(1), options) - score(base.sum(1), options)
    delta = float(diffs.mean())
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    per_seed = influence(row, options, metric) - influence(base, options, metric)   # (n, N)
    var_test = float(sentences * per_seed.mean(0).var())
    var_test_seed = float(sentences * per_seed.var(1).mean())
    parts = SeedTest(delta, float("nan"), float("nan"), float("nan"), float("nan"), n, sd, var_test, var_test_seed,
                     sentences)
    if n < 2:
        return parts
    if combine == "shared":
        se = math.sqrt(sd ** 2 / n + parts.shared_var)
    elif combine == "sum":
        se = math.sqrt(sd ** 2 / n + var_test)
    else:
        se = math.sqrt(max(sd ** 2 / n, var_test))
    p, low, high = t_test(delta, se, n - 1)
    return replace(parts, se=se, p=p, ci_low=low, ci_high=high)


def t_test(delta: float, se: float, df: int):
    """``(p, ci_low, ci_high)`` of ``delta`` with standard error ``se`` on Student's t(df)."""
    if df < 1 or math.isnan(se):
        return float("nan"), float("nan"), float("nan")
    if se == 0:   # outputs identical to the baseline's sentence for sentence (or a one-sentence test set)
        return (1.0 if delta == 0 else 0.0), delta, delta
    from scipy import stats as scipy_stats  # 1-2 s to import: paid by a table that tests, not by --help

    half = float(scipy_stats.t.ppf(1 - ALPHA / 2, df)) * se
    return float(2 * scipy_stats.t.sf(abs(delta) / se, df)), delta - half, delta + half


def holm(p_values: dict) -> dict:
    """Holm-Bonferroni adjusted p-values (name -> p), over the given family."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    m, running, out = len(ordered), 0.0, {}
    for i, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        out[name] = running
    return out


def verdict(delta: float, p_adjusted: float) -> str:
    if p_adjusted is None or math.isnan(p_adjusted) or p_adjusted >= ALPHA:
        return NO_EVIDENCE
    return BETTER if delta > 0 else WORSE
