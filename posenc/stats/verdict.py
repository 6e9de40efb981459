"""The verdict of a row against its baseline: a paired t-test over seeds whose variance also covers
the test set's sampling of sentences, Holm's adjustment over the rows sharing a baseline, and the words.

Δ is the table's: the mean over paired seeds of the per-seed corpus-score differences
d_s = score(row, seed s) - score(baseline, seed s). A d_s varies by the seed's own effect, by
sentence noise that differs from seed to seed, and by the test set's sampling of sentences that
every seed shares (a row luckier on these very sentences in every seed). The spread of the d_s
over seeds, s_d, holds the first two; it cannot show the third. So

    se² = s_d² / n + v_shared,   t = Δ / se,   Student's t with the df below, two-sided.

The degrees of freedom are Welch-Satterthwaite's for that sum (``degrees_of_freedom``): n - 1 for
s_d², sentences - 1 for v_shared, which is measured from every test sentence. Where s_d²/n
dominates, df → n - 1, the exact t of the seed part (normal d_s), even at n = 3; where v_shared
dominates, df grows towards the sentences' and the test stops paying t(0.975, 2) = 4.30 for a
part that it knows well. Plain Satterthwaite trusts an s_d that is small by chance (3 seeds that
agree): its level reaches 0.078 at n = 3. So the seeds' part enters the df at its one-sided 90%
upper confidence limit (``DF_GUARD``). At 75% (issues 22 to 29) the level at α = 0.05 was 0.051
or less for every mix of the two parts at n = 3, 5 and 10, but Holm tests the first of m rows at
α/m, and the tail was heavier there: at n = 3, where the seeds' part is most of se², P(p <= α/5)
reached 1.74 α/5 in normal theory, and a 4-row table's family-wise rate up to 0.067 on real text
(issue 30). 90% is the lowest of 75, 80, 85 and 90% whose tail in normal theory is at most α/m
for m = 1..5 at n = 3, 5 and 10 and every mix (tests/test_verdict_holm.py; 89% is the edge); the
calibration on real text measures the family-wise rate and the power this costs
(scripts/calibrate_significance.py --only holm,holm-power; results/significance_calibration.md).

v_shared comes from the per-sentence influence of each
seed's output on its corpus score (the delta-method variance, the large-sample value of a
bootstrap over sentences, which tests/test_report_verdict.py checks against a bootstrap): with
one draw of sentences shared by all seeds the variance of Δ is v_test = v_shared + v_seed / n,
and per seed it is v_shared + v_seed, which separates the two. The calibration
(scripts/calibrate_significance.py, results/significance_calibration.md) measured this against
two alternatives (s_d²/n + v_test, and the larger of s_d²/n and v_test) on real text and chose it;
the guarded Welch-Satterthwaite df replaced t(n - 1) after the calibration of issue 22.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from posenc.metrics_vector import SCORERS

ALPHA = 0.05
BETTER, WORSE, NO_EVIDENCE = "better", "worse", "no evidence"
# The seeds' part s_d²/n enters the degrees of freedom at its upper confidence limit of this level
# (one-sided 90%): a small s_d from few seeds must not buy a large df, not even in the tail that
# Holm tests the first of five rows at (module docstring).
DF_GUARD = 0.90


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
    df: float = float("nan")   # the t's degrees of freedom (``degrees_of_freedom``)

    @property
    def sentence_var(self) -> float:
        """Sentence noise of one seed's d_s that differs from seed to seed (``split_variance``)."""
        return float(split_variance(self.var_test, self.var_test_seed, self.n)[0])

    @property
    def shared_var(self) -> float:
        """Sampling of test sentences that every seed shares: what the seeds' spread cannot show."""
        return float(split_variance(self.var_test, self.var_test_seed, self.n)[1])


def split_variance(var_test, var_test_seed, n: int):
    """``(sentence_var, shared_var)`` from the variance over sentences of Δ (mean over n seeds) and
    of one seed's d_s: the per-seed one exceeds the mean's by (1 - 1/n) of the sentence noise that
    differs between seeds; the rest is shared. Arrays broadcast; n < 2 cannot separate them."""
    var_test, var_test_seed = np.asarray(var_test, dtype=float), np.asarray(var_test_seed, dtype=float)
    if n < 2:
        return np.full(var_test.shape, np.nan), var_test
    sentence = np.maximum((var_test_seed - var_test) * n / (n - 1), 0.0)
    return sentence, np.maximum(var_test - sentence / n, 0.0)


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


def guard_factor(seeds, level: float = DF_GUARD):
    """(n - 1) / chi2.ppf(1 - level, n - 1): the factor that takes s_d² to its upper limit."""
    from scipy import stats as scipy_stats

    df = np.maximum(np.asarray(seeds, dtype=float) - 1, 1)
    return df / scipy_stats.chi2.ppf(1 - level, df)


def degrees_of_freedom(seed_part, shared, seeds, sentences, guard=None):
    """Welch-Satterthwaite degrees of freedom of ``seed_part + shared`` (seed_part = s_d²/n on
    ``seeds`` - 1 df, shared = v_shared on ``sentences`` - 1 df), with the seeds' part at its
    DF_GUARD upper limit. Arrays broadcast; ``guard`` is ``guard_factor(seeds)`` when precomputed."""
    seed_part, shared = np.asarray(seed_part, dtype=float), np.asarray(shared, dtype=float)
    nu_seeds = np.asarray(seeds, dtype=float) - 1
    nu_shared = np.maximum(np.asarray(sentences, dtype=float) - 1, 1)
    upper = seed_part * (guard_factor(seeds) if guard is None else guard)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (upper + shared) ** 2 / (upper ** 2 / nu_seeds + shared ** 2 / nu_shared)
    return np.where(upper + shared > 0, df, nu_seeds)


def seed_parts(row: np.ndarray, base: np.ndarray, options: dict, metric: str = "bleu"):
    """``(d_s, influence of d_s)`` per paired seed: the corpus-score differences ``(..., n)`` and each
    sentence's influence on them ``(..., n, N)``, of ``row`` and ``base`` ``(..., n seeds, N sentences, k)``.
    Seeds that arrive in batches (the adaptive calibration) are scored once and joined on the seed axis."""
    score = SCORERS[metric]
    diffs = score(row.sum(-2, dtype=np.float64), options) - score(base.sum(-2, dtype=np.float64), options)
    return diffs, influence(row, options, metric) - influence(base, options, metric)


def combine_parts(diffs: np.ndarray, per_seed: np.ndarray):
    """``(delta, sd_diff, var_test, var_test_seed)`` from ``seed_parts`` over n seeds."""
    n, sentences = per_seed.shape[-2], per_seed.shape[-1]
    sd = diffs.std(-1, ddof=1) if n > 1 else np.zeros(diffs.shape[:-1])
    return (diffs.mean(-1), sd, sentences * per_seed.mean(-2).var(-1), sentences * per_seed.var(-1).mean(-1))


def test_parts(row: np.ndarray, base: np.ndarray, options: dict, metric: str = "bleu"):
    """``(delta, sd_diff, var_test, var_test_seed)`` of rows against baselines, arrays over the
    leading axes of ``row`` and ``base`` ``(..., n seeds, N sentences, k)``."""
    return combine_parts(*seed_parts(row, base, options, metric))


def p_values(delta, sd_diff, var_test, var_test_seed, n: int, sentences: int, df=None, guard=None):
    """``(p, se, df)`` of the verdict's test, arrays; ``df`` given (e.g. n - 1) replaces its
    degrees of freedom (the calibration's "before"), ``guard=1`` takes plain Satterthwaite's."""
    from scipy import stats as scipy_stats

    shared = split_variance(var_test, var_test_seed, n)[1]
    seed_part = np.asarray(sd_diff, dtype=float) ** 2 / n
    se = np.sqrt(seed_part + shared)
    df = degrees_of_freedom(seed_part, shared, n, sentences, guard) if df is None else np.broadcast_to(df, se.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * scipy_stats.t.sf(np.abs(delta) / se, df)
    return np.where(se > 0, p, np.where(np.asarray(delta) == 0, 1.0, 0.0)), se, df


def seed_test(row_stats, base_stats, options: dict, metric: str = "bleu") -> SeedTest:
    """The test of one row against its baseline. ``row_stats`` and ``base_stats``: per paired seed
    (same order), the per-sentence statistics ``(sentences, k)`` on the same test set."""
    row = np.stack([np.asarray(s, dtype=np.float64) for s in row_stats])      # (n, N, k)
    base = np.stack([np.asarray(s, dtype=np.float64) for s in base_stats])
    n, sentences, _ = row.shape
    delta, sd, var_test, var_test_seed = (float(x) for x in test_parts(row, base, options, metric))
    parts = SeedTest(delta, float("nan"), float("nan"), float("nan"), float("nan"), n, sd, var_test, var_test_seed,
                     sentences)
    if n < 2:
        return parts
    _, se, df = (float(x) for x in p_values(delta, sd, var_test, var_test_seed, n, sentences))
    p, low, high = t_test(delta, se, df)
    return replace(parts, se=se, p=p, ci_low=low, ci_high=high, df=df)


def t_test(delta: float, se: float, df: float):
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
