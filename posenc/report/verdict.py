"""The verdict of a row against its baseline: a paired t-test over seeds whose variance also covers
the test set's sampling, Holm's adjustment over the rows sharing a baseline, and the words.

Δ is the table's: the mean over paired seeds of the per-seed corpus-score differences
d_s = score(row, seed s) - score(baseline, seed s). Its variance is estimated two ways and the
larger is used:

- ``s_d² / n``, the spread of the d_s over seeds. Each seed's d_s is measured on the test set, so
  this already holds that seed's sentence noise as well as the seed's own effect;
- a bootstrap over test sentences (one shared draw for every seed and both systems) of Δ: a floor
  for when the seeds agree by chance so closely that s_d is near 0.

``t = Δ / se`` against Student's t with n - 1 degrees of freedom (exact for normal d_s, and
conservative with the floor), two-sided. The calibration in results/significance_calibration.md
(scripts/calibrate_significance.py) checks its false-positive rate and power on real text.
"""

import math
import os
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from posenc.report.vector_scores import SCORERS

ALPHA = 0.05
RESAMPLES = 1000          # bootstrap draws of test sentences for the floor
BETTER, WORSE, NO_EVIDENCE = "better", "worse", "no evidence"


@dataclass(frozen=True)
class SeedTest:
    delta: float          # mean over seeds of d_s
    se: float             # standard error of delta used by the test
    p: float              # two-sided
    ci_low: float         # 95% interval of delta from the same t
    ci_high: float
    n: int                # paired seeds
    sd_diff: float        # s_d: sample sd of the d_s over seeds
    se_bootstrap: float   # test-set bootstrap sd of delta (the floor)
    sentences: int        # test sentences per seed

    @property
    def df(self) -> int:
        return self.n - 1


def resample_counts(sentences: int, resamples: int = RESAMPLES, seed=None) -> np.ndarray:
    """How often each sentence is drawn in each bootstrap resample, ``(resamples, sentences)``.
    The seed is sacreBLEU's (``SACREBLEU_SEED``, default 12345), so a table renders the same twice."""
    if seed is None:
        text = os.environ.get("SACREBLEU_SEED", "12345")
        seed = None if text.lower() == "none" else int(text)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, sentences, size=(resamples, sentences))
    flat = index + np.arange(resamples)[:, None] * sentences
    return np.bincount(flat.ravel(), minlength=resamples * sentences).reshape(resamples, sentences).astype(np.float32)


def seed_test(row_stats, base_stats, options: dict, metric: str = "bleu", counts=None) -> SeedTest:
    """The test of one row against its baseline. ``row_stats`` and ``base_stats``: per paired seed
    (same order), the per-sentence statistics ``(sentences, k)`` on the same test set. ``counts``:
    the bootstrap's draws (``resample_counts``), shared between calls to save drawing them again."""
    score = SCORERS[metric]
    row = np.stack([np.asarray(s, dtype=np.float32) for s in row_stats])      # (n, N, k)
    base = np.stack([np.asarray(s, dtype=np.float32) for s in base_stats])
    n, sentences, k = row.shape
    diffs = score(row.sum(1, dtype=np.float64), options) - score(base.sum(1, dtype=np.float64), options)
    delta = float(diffs.mean())
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    if counts is None or counts.shape[1] != sentences:
        counts = resample_counts(sentences)
    both = np.concatenate([row, base]).transpose(1, 0, 2).reshape(sentences, 2 * n * k)
    summed = (counts @ both).reshape(-1, 2, n, k)                               # (B, system, seed, k)
    boot = (score(summed[:, 0], options) - score(summed[:, 1], options)).mean(-1)
    se_bootstrap = float(boot.std(ddof=1))
    se = math.sqrt(max(sd ** 2 / n, se_bootstrap ** 2)) if n > 1 else float("nan")
    p, low, high = t_test(delta, se, n - 1)
    return SeedTest(delta, se, p, low, high, n, sd, se_bootstrap, sentences)


def t_test(delta: float, se: float, df: int):
    """``(p, ci_low, ci_high)`` of ``delta`` with standard error ``se`` on Student's t(df)."""
    if df < 1 or math.isnan(se):
        return float("nan"), float("nan"), float("nan")
    if se == 0:   # outputs identical to the baseline's sentence for sentence (or a one-sentence test set)
        return (1.0 if delta == 0 else 0.0), delta, delta
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
