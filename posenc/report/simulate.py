"""Sweeps whose truth is known, made of real text scored by sacreBLEU: for calibrating the verdict
(scripts/calibrate_significance.py) and for the tests of the verdict and the power planning.

A system's output for one seed is the references corrupted word by word (each word replaced by
another word of the test set's vocabulary, or dropped) at a rate that depends on the system and
the seed. Scoring thousands of such outputs with sacreBLEU would take hours, so the sentences'
statistics are extracted once, for a grid of rates and a few independent corruptions per rate
(``Pool``); an output at any rate takes, for each sentence, the statistics of one corruption of
that sentence at one of the two neighbouring grid rates (the upper with the probability that
interpolates the rate), so every sentence's statistics are those of a real corrupted sentence.
"""

import random
from dataclasses import dataclass

import numpy as np

from posenc.report.significance import Scorer
from posenc.report.vector_scores import bleu
from posenc.report.verdict import ALPHA, resample_counts, seed_test


def corrupt(line: str, rate: float, rng: random.Random, vocabulary: list) -> str:
    words = []
    for word in line.split():
        if rng.random() >= rate:
            words.append(word)
        elif rng.random() < 0.5:
            words.append(rng.choice(vocabulary))
    return " ".join(words)


@dataclass
class Pool:
    rates: np.ndarray        # (G,) increasing
    stats: np.ndarray        # (G, draws, N, k): BLEU statistics of each corrupted sentence
    curve: np.ndarray        # (G,): corpus BLEU at each rate, mean over draws

    @classmethod
    def build(cls, references, rates, draws: int = 4, seed: int = 0) -> "Pool":
        rng = random.Random(seed)
        vocabulary = sorted({w for line in references for w in line.split()})
        scorer = Scorer()
        stats = np.stack([np.stack([
            np.asarray(scorer.sentence_stats([corrupt(line, rate, rng, vocabulary) for line in references],
                                             references, {}, "pool"), dtype=np.int32)
            for _ in range(draws)]) for rate in rates])
        curve = bleu(stats.sum(2), {}).mean(1)
        return cls(np.asarray(rates, dtype=float), stats, curve)

    def rate_for(self, target_bleu):
        """The corruption rate whose corpus BLEU is ``target_bleu`` (the curve falls with the rate)."""
        return np.interp(-np.asarray(target_bleu, dtype=float), -self.curve, self.rates)

    def output(self, rate: float, rng: np.random.Generator, sentences: np.ndarray) -> np.ndarray:
        """Per-sentence statistics ``(len(sentences), k)`` of one output at ``rate``; ``sentences``
        indexes the pool's sentences (a test set of another size resamples them)."""
        position = np.interp(rate, self.rates, np.arange(len(self.rates)))
        low = int(np.floor(position))
        high = min(low + 1, len(self.rates) - 1)
        grid = np.where(rng.random(len(sentences)) < position - low, high, low)
        draw = rng.integers(0, self.stats.shape[1], len(sentences))
        return self.stats[grid, draw, sentences]


def sacrebleu_star_p(row: np.ndarray, base: np.ndarray, counts: np.ndarray, options=None) -> float:
    """Today's ``p``: sacreBLEU's paired bootstrap (``significance._paired_bs_test``) on the seeds'
    outputs concatenated, vectorized; ``counts`` ``(B, sentences)``: how often each sentence is
    drawn in each resample (sacreBLEU draws them with ``rng.choice`` from SACREBLEU_SEED)."""
    options = options or {}
    real = abs(float(bleu(row.sum(0, dtype=np.float64), options) - bleu(base.sum(0, dtype=np.float64), options)))
    sample = np.abs(bleu(counts @ row.astype(np.float32), options) - bleu(counts @ base.astype(np.float32), options))
    return (np.sum(sample - sample.mean() > real) + 1) / (len(sample) + 1)


@dataclass(frozen=True)
class Setting:
    seeds: int
    sentences: int
    seed_sd: float          # sd of one system's corpus BLEU over seeds (before sentence noise)
    effect: float           # true difference in BLEU, row minus baseline
    base_bleu: float = 40.0


def simulate(pool: Pool, setting: Setting, comparisons: int, seed: int = 0, resamples: int = 200,
             star_resamples: int = 300, with_star: bool = True):
    """``comparisons`` independent sweeps of a row against its baseline. Returns a dict of arrays:
    ``delta``, ``p_seeds`` (the verdict's p), ``ci_low``/``ci_high``, ``p_star`` (today's p), and
    ``seed_bleu_sd`` (the baseline's measured sd over seeds, sentence noise included)."""
    rng = np.random.default_rng(seed)
    n, size = setting.seeds, setting.sentences
    counts = resample_counts(size, resamples, seed=seed + 1)
    star_counts = resample_counts(n * size, star_resamples, seed=seed + 2) if with_star else None
    out = {k: np.empty(comparisons) for k in ("delta", "p_seeds", "ci_low", "ci_high", "p_star", "seed_bleu_sd",
                                              "sd_diff", "se_bootstrap")}
    for c in range(comparisons):
        # One test set per sweep: the pool's own sentences, or a resample of them to another size.
        sentences = (np.arange(size) if size == pool.stats.shape[2]
                     else rng.integers(0, pool.stats.shape[2], size))
        base_bleus = setting.base_bleu + setting.seed_sd * rng.standard_normal(n)
        row_bleus = setting.base_bleu + setting.effect + setting.seed_sd * rng.standard_normal(n)
        base = [pool.output(r, rng, sentences) for r in pool.rate_for(base_bleus)]
        row = [pool.output(r, rng, sentences) for r in pool.rate_for(row_bleus)]
        test = seed_test(row, base, {}, counts=counts)
        out["delta"][c], out["p_seeds"][c] = test.delta, test.p
        out["ci_low"][c], out["ci_high"][c] = test.ci_low, test.ci_high
        out["sd_diff"][c], out["se_bootstrap"][c] = test.sd_diff, test.se_bootstrap
        out["seed_bleu_sd"][c] = float(np.std(bleu(np.stack(base).sum(1, dtype=np.float64), {}), ddof=1))
        out["p_star"][c] = sacrebleu_star_p(np.concatenate(row), np.concatenate(base), star_counts) \
            if with_star else np.nan
    return out


def rejection_rate(p_values, alpha: float = ALPHA) -> float:
    return float(np.mean(np.asarray(p_values) < alpha))
