"""Sweeps whose truth is known, made of real text scored by sacreBLEU: for calibrating the verdict
(scripts/calibrate_significance.py) and for the tests of the verdict and the power planning.

A system's output for one seed is the references corrupted word by word (each word replaced by
another word of the test set's vocabulary, or dropped) at a rate that depends on the system and
the seed. Scoring thousands of such outputs with sacreBLEU would take hours, so the sentences'
statistics are extracted once, for a grid of rates and a few independent corruptions per rate
(``Pool``); an output at any rate takes, for each sentence, the statistics of one corruption of
that sentence at one of the two neighbouring grid rates (the upper with the probability that
interpolates the rate), so every sentence's statistics are those of a real corrupted sentence.

Two models of the sentence noise. ``independent``: every output draws its corruptions afresh, so
seeds of one system differ sentence by sentence and the seeds share nothing on the test set.
``shared``: a system draws which corruption each sentence gets once, and its seeds only move its
rate, so the seeds agree sentence by sentence and a system can be luckier than another on this
very test set in every seed (what seeds of one real architecture do, to a degree).
"""

import math
import random
from dataclasses import dataclass

import numpy as np

from posenc.report.significance import Scorer
from posenc.report.vector_scores import bleu
from posenc.report.verdict import ALPHA, seed_test, t_test

NOISE = ("independent", "shared")


def resample_counts(sentences: int, resamples: int, seed: int) -> np.ndarray:
    """How often each sentence is drawn in each bootstrap resample, ``(resamples, sentences)``."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, sentences, size=(resamples, sentences))
    flat = index + np.arange(resamples)[:, None] * sentences
    return np.bincount(flat.ravel(), minlength=resamples * sentences).reshape(resamples, sentences).astype(np.float32)


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

    def noise(self, rng: np.random.Generator, size: int):
        """The random choices of one output: per sentence a uniform (which grid rate) and a draw."""
        return rng.random(size), rng.integers(0, self.stats.shape[1], size)

    def output(self, rate: float, noise, sentences: np.ndarray) -> np.ndarray:
        """Per-sentence statistics ``(len(sentences), k)`` of one output at ``rate`` with the choices
        ``noise``; ``sentences`` indexes the pool's sentences (another test size resamples them)."""
        uniform, draw = noise
        position = np.interp(rate, self.rates, np.arange(len(self.rates)))
        low = int(np.floor(position))
        high = min(low + 1, len(self.rates) - 1)
        grid = np.where(uniform < position - low, high, low)
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
    seed_sd: float          # sd of one system's corpus BLEU over seeds from its rate (before sentence noise)
    effect: float           # true difference in BLEU, row minus baseline
    noise: str = "independent"
    base_bleu: float = 40.0


def combined(test, combine: str) -> float:
    """se² of the verdict's alternatives, from the same test's parts."""
    if combine == "sum":
        return test.sd_diff ** 2 / test.n + test.var_test
    if combine == "max":
        return max(test.sd_diff ** 2 / test.n, test.var_test)
    return test.se ** 2


def simulate(pool: Pool, setting: Setting, comparisons: int, seed: int = 0, star_comparisons: int = None,
             star_resamples: int = 300):
    """``comparisons`` independent sweeps of a row against its baseline. Returns a dict of arrays:
    ``delta``, ``p_shared`` (the verdict's p), ``p_sum`` and ``p_max`` (the alternatives),
    ``ci_low``/``ci_high``, ``p_star`` (today's p: sacreBLEU's paired bootstrap on the concatenated
    outputs; NaN beyond the first ``star_comparisons``), ``seed_bleu_sd`` (the baseline's measured
    sd over seeds, sentence noise included), and the test's variance parts."""
    rng = np.random.default_rng(seed)
    n, size = setting.seeds, setting.sentences
    star_comparisons = comparisons if star_comparisons is None else star_comparisons
    star_counts = resample_counts(n * size, star_resamples, seed=seed + 2) if star_comparisons else None
    keys = ("delta", "p_shared", "p_sum", "p_max", "ci_low", "ci_high", "p_star", "seed_bleu_sd", "sd_diff", "var_test",
            "var_test_seed")
    out = {k: np.full(comparisons, np.nan) for k in keys}
    for c in range(comparisons):
        # One test set per sweep: the pool's own sentences, or a resample of them to another size.
        sentences = (np.arange(size) if size == pool.stats.shape[2]
                     else rng.integers(0, pool.stats.shape[2], size))
        base_bleus = setting.base_bleu + setting.seed_sd * rng.standard_normal(n)
        row_bleus = setting.base_bleu + setting.effect + setting.seed_sd * rng.standard_normal(n)
        outputs = {}
        for name, bleus in (("base", base_bleus), ("row", row_bleus)):
            shared = pool.noise(rng, size)
            outputs[name] = [pool.output(r, shared if setting.noise == "shared" else pool.noise(rng, size), sentences)
                             for r in pool.rate_for(bleus)]
        test = seed_test(outputs["row"], outputs["base"], {})
        for combine in ("sum", "max"):
            out[f"p_{combine}"][c] = t_test(test.delta, math.sqrt(combined(test, combine)), n - 1)[0]
        out["delta"][c], out["p_shared"][c] = test.delta, test.p
        out["ci_low"][c], out["ci_high"][c] = test.ci_low, test.ci_high
        out["sd_diff"][c], out["var_test"][c], out["var_test_seed"][c] = test.sd_diff, test.var_test, test.var_test_seed
        out["seed_bleu_sd"][c] = float(np.std(bleu(np.stack(outputs["base"]).sum(1, dtype=np.float64), {}), ddof=1))
        if c < star_comparisons:
            out["p_star"][c] = sacrebleu_star_p(np.concatenate(outputs["row"]), np.concatenate(outputs["base"]),
                                                star_counts)
    return out


def rejection_rate(p_values, alpha: float = ALPHA) -> float:
    p_values = np.asarray(p_values)
    p_values = p_values[~np.isnan(p_values)]
    return float(np.mean(p_values < alpha)) if len(p_values) else float("nan")
