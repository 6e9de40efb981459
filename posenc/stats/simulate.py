"""Sweeps whose truth is known, made of real text scored by sacreBLEU: for calibrating the verdict
(scripts/calibrate_significance.py) and for the tests of the verdict and the power planning.

A system's output for one seed is the references corrupted word by word (each word replaced by
another word of the test set's vocabulary, or dropped) at a rate that depends on the system and
the seed. Scoring thousands of such outputs with sacreBLEU would take hours, so the sentences'
statistics are extracted once, for a grid of rates and a few independent corruptions per rate
(``Pool``); an output at any rate takes, for each sentence, the statistics of one corruption of
that sentence at one of the two neighbouring grid rates (the upper with the probability that
interpolates the rate), so every sentence's statistics are those of a real corrupted sentence.

Models of the sentence noise (``NOISE``): for each sentence, which corruption an output gets is
drawn once for both systems (two models trained on one corpus fail on the same hard sentences),
once per system (its seeds agree sentence by sentence, so one system can be luckier than another
on this very test set in every seed), or afresh for each output, in set proportions.
"""

import random
from dataclasses import dataclass

import numpy as np

from posenc.metrics import Scorer
from posenc.metrics_vector import bleu
from posenc.stats.verdict import ALPHA, p_values, test_parts


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


def sacrebleu_star_p(row: np.ndarray, base: np.ndarray, counts: np.ndarray, options=None) -> float:
    """Today's ``p``: sacreBLEU's paired bootstrap (``significance._paired_bs_test``) on the seeds'
    outputs concatenated, vectorized; ``counts`` ``(B, sentences)``: how often each sentence is
    drawn in each resample (sacreBLEU draws them with ``rng.choice`` from SACREBLEU_SEED)."""
    options = options or {}
    real = abs(float(bleu(row.sum(0, dtype=np.float64), options) - bleu(base.sum(0, dtype=np.float64), options)))
    sample = np.abs(bleu(counts @ row.astype(np.float32), options) - bleu(counts @ base.astype(np.float32), options))
    return (np.sum(sample - sample.mean() > real) + 1) / (len(sample) + 1)


# How an output draws, for each sentence, which real corrupted sentence it gets:
# (share across the two systems, share across a system's seeds); the rest is fresh per output.
NOISE = {
    "independent": (0.0, 0.0),       # every output afresh: seeds and systems share nothing
    "partly shared": (0.3, 0.3),     # 30% of sentences go the same way in both systems (one corpus's hard
                                     # sentences), 30% the same way in a system's seeds, 40% per output
    "shared": (0.0, 1.0),            # a system's seeds agree sentence by sentence
}


@dataclass(frozen=True)
class Setting:
    seeds: int
    sentences: int
    seed_sd: float          # sd of one system's corpus BLEU over seeds from its rate (before sentence noise)
    effect: float           # true difference in BLEU, row minus baseline (a tuple: one per row, ``sequential``)
    noise: str = "partly shared"
    base_bleu: float = 40.0


KEYS = ("delta", "p", "p_before", "p_plain", "ci_low", "ci_high", "p_star", "seed_bleu_sd", "sd_diff", "var_test",
        "var_test_seed")


@dataclass(frozen=True)
class Sweeps:
    """What the seeds of each of many sweeps share: its test set (indices into the pool) and, per
    sentence, the noise model's kind and the draws shared across both systems or a system's seeds."""
    sentences: np.ndarray    # (count, size)
    kind: np.ndarray         # (count, 1, 1, size)
    uniform: np.ndarray      # (count, 1 or systems, 1, size): the shared draw of the grid rate
    draw: np.ndarray         # (count, 1 or systems, 1, size): the shared corruption

    def take(self, index) -> "Sweeps":
        return Sweeps(self.sentences[index], self.kind[index], self.uniform[index], self.draw[index])


def _outputs(pool: Pool, setting: Setting, count: int, rng: np.random.Generator, sweeps: Sweeps = None,
             systems: int = 2):
    """Per-sentence statistics of ``count`` sweeps, ``(count, systems, seeds, sentences, k)``:
    system 0 the baseline, the others rows ``setting.effect`` above it, and their ``Sweeps``. Each
    sweep's test set is ``sentences`` distinct sentences of the pool (the pool's own when it has as
    many). Given ``sweeps`` (one per sweep), the seeds are more seeds of those sweeps: the same test
    sets and shared draws."""
    n, size, available = setting.seeds, setting.sentences, pool.stats.shape[2]
    across, within = NOISE[setting.noise]
    draws = pool.stats.shape[1]
    if sweeps is None:
        if size > available:
            raise ValueError(f"{size} test sentences asked for; the pool has {available} distinct ones")
        sentences = (np.broadcast_to(np.arange(size), (count, size)) if size == available
                     else np.argsort(rng.random((count, available)), axis=1)[:, :size])
        kind = rng.random((count, 1, 1, size))
        u_across, u_within = rng.random((count, 1, 1, size)), rng.random((count, systems, 1, size))
    else:
        count = len(sweeps.sentences)
    u_fresh = rng.random((count, systems, n, size))
    if sweeps is None:
        d_across, d_within = (rng.integers(0, draws, (count, 1, 1, size)),
                              rng.integers(0, draws, (count, systems, 1, size)))
    d_fresh = rng.integers(0, draws, (count, systems, n, size))
    if sweeps is None:
        sweeps = Sweeps(sentences, kind, np.where(kind < across, u_across, u_within),
                        np.where(kind < across, d_across, d_within))
    fresh = sweeps.kind >= across + within
    uniform, draw = np.where(fresh, u_fresh, sweeps.uniform), np.where(fresh, d_fresh, sweeps.draw)
    effects = np.zeros(systems)
    effects[1:] = setting.effect          # one Δ for every row, or one each
    bleus = setting.base_bleu + effects[None, :, None] + setting.seed_sd * rng.standard_normal((count, systems, n))
    position = np.interp(pool.rate_for(bleus), pool.rates, np.arange(len(pool.rates)))[..., None]   # (c, 2, n, 1)
    low = np.floor(position).astype(int)
    grid = np.where(uniform < position - low, np.minimum(low + 1, len(pool.rates) - 1), low)
    return pool.stats[grid, draw, sweeps.sentences[:, None, None, :]], sweeps


def simulate(pool: Pool, setting: Setting, comparisons: int, seed: int = 0, star_comparisons: int = 0,
             star_resamples: int = 300, chunk: int = 2_000_000):
    """``comparisons`` independent sweeps of a row against its baseline, vectorised in chunks of
    about ``chunk`` sentences x seeds. Returns a dict of arrays (``KEYS``): ``delta``, ``p`` (the
    verdict's p), ``p_before`` (the same se on t(n - 1), the verdict before issue 22), ``p_plain``
    (unguarded Welch-Satterthwaite df), ``ci_low``/``ci_high`` (the verdict's), ``p_star``
    (sacreBLEU's paired bootstrap on the concatenated outputs; NaN beyond the first
    ``star_comparisons``), ``seed_bleu_sd`` (the baseline's sd over seeds, sentence noise
    included) and the test's variance parts."""
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(seed)
    n, size = setting.seeds, setting.sentences
    out = {k: np.full(comparisons, np.nan) for k in KEYS}
    step = max(1, chunk // (2 * n * size))
    star_counts = resample_counts(n * size, star_resamples, seed=seed + 2) if star_comparisons else None
    for start in range(0, comparisons, step):
        part = slice(start, min(start + step, comparisons))
        stats = _outputs(pool, setting, part.stop - part.start, rng)[0]
        delta, sd, var_test, var_test_seed = test_parts(stats[:, 1], stats[:, 0], {})
        p, se, df = p_values(delta, sd, var_test, var_test_seed, n, size)
        half = scipy_stats.t.ppf(1 - ALPHA / 2, df) * se
        out["p"][part], out["ci_low"][part], out["ci_high"][part] = p, delta - half, delta + half
        out["p_before"][part] = p_values(delta, sd, var_test, var_test_seed, n, size, df=n - 1)[0]
        out["p_plain"][part] = p_values(delta, sd, var_test, var_test_seed, n, size, guard=1.0)[0]
        out["delta"][part], out["sd_diff"][part] = delta, sd
        out["var_test"][part], out["var_test_seed"][part] = var_test, var_test_seed
        out["seed_bleu_sd"][part] = bleu(stats[:, 0].sum(-2, dtype=np.float64), {}).std(-1, ddof=1)
        for c in range(part.start, min(part.stop, star_comparisons)):
            row, base = stats[c - part.start, 1], stats[c - part.start, 0]
            out["p_star"][c] = sacrebleu_star_p(np.concatenate(row), np.concatenate(base), star_counts)
    return out


def rejection_rate(p_values, alpha: float = ALPHA) -> float:
    p_values = np.asarray(p_values)
    p_values = p_values[~np.isnan(p_values)]
    return float(np.mean(p_values < alpha)) if len(p_values) else float("nan")


STOPS = ("", "plan", "max_seeds", "no plan")     # the ``stopped`` codes of ``adaptive``: an index into this


def adaptive(pool: Pool, setting: Setting, rule, plan_effect: float, plan_sentences: int = None,
             comparisons: int = 1000, seed: int = 0, interim: str = "booking", no_plan: str = "stop",
             chunk: int = 100):
    """Long because it is the old rule's sweep loop written out as the sweeper ran it, one step per
    stage, so that the calibration can be read against the sweeper line by line.

    ``comparisons`` sweeps of a row against its baseline run by the seeds strategy
    (``posenc.stats.old_seeds_rule.SeedsRule``): the pilot's seeds first, then after each batch the
    components of the seeds so far (``verdict.seed_parts``/``combine_parts``, ``split_variance``, as
    the report takes them from its ``SeedTest``) plan the comparison for ``plan_effect`` at
    ``setting.sentences`` (``power.needed`` of the components at their upper limit: ``booking``),
    ``rule.next`` decides, and at the stop the verdict's test (``verdict.p_values``) runs on every
    seed the row ran. ``setting.seeds`` is not used. The plan sees the first ``plan_sentences`` of
    each sweep's test set (default all: the test set the verdict runs on; fewer: a pilot's smaller
    test set planned for the whole with ``--test-size``). ``interim``: "booking" plans every look
    at the upper limit; "plug-in" books at the pilot's look only and plans later looks with the
    seeds' spread as it is; "pilot" keeps the pilot's booking (no re-planning); "grow" re-plans but
    never below an earlier booking. ``no_plan``: "stop" passes the rule None where no number of
    seeds reaches the power; "continue" passes max_seeds + 1 (the row goes on to max_seeds).
    Returns arrays: ``p``, ``delta``, ``seeds`` (the seeds the row ran), ``stopped`` (index into
    STOPS), ``pilot_plan`` (the pilot's booking, -1: none)."""
    from dataclasses import replace

    from posenc.stats import power as power_mod
    from posenc.stats.verdict import combine_parts, seed_parts, split_variance

    rng = np.random.default_rng(seed)
    size = setting.sentences
    seen = plan_sentences or size
    out = {k: np.full(comparisons, np.nan) for k in ("p", "delta")}
    out.update({k: np.zeros(comparisons, dtype=int) for k in ("seeds", "stopped", "pilot_plan")})
    for start in range(0, comparisons, chunk):
        count = min(chunk, comparisons - start)
        have, want = np.zeros(count, dtype=int), np.full(count, rule.next(0, None).seeds)
        # Per seed: d_s and its sentences' influence on the whole test set, and on the sentences the plan sees.
        parts = {"d": np.zeros((count, 0)), "i": np.zeros((count, 0, size))}
        if seen != size:
            parts.update({"d seen": np.zeros((count, 0)), "i seen": np.zeros((count, 0, seen))})
        sweeps, looks, booked = None, 0, np.zeros(count, dtype=int)
        while np.any(want > have):
            grow = int(want.max()) - parts["d"].shape[1]
            if grow > 0:
                parts = {k: np.concatenate([v, np.zeros(v.shape[:1] + (max(grow, v.shape[1]),) + v.shape[2:])], 1)
                         for k, v in parts.items()}
            for got, add in sorted(set(zip(have[want > have].tolist(), (want - have)[want > have].tolist()))):
                index = np.flatnonzero((have == got) & (want - have == add))
                stats, made = _outputs(pool, replace(setting, seeds=add), len(index), rng,
                                       None if sweeps is None else sweeps.take(index))
                sweeps = made if sweeps is None else sweeps
                row, base = stats[:, 1], stats[:, 0]
                new = got + np.arange(add)
                parts["d"][index[:, None], new], parts["i"][index[:, None], new] = seed_parts(row, base, {})
                if seen != size:
                    parts["d seen"][index[:, None], new], parts["i seen"][index[:, None], new] = \
                        seed_parts(row[..., :seen, :], base[..., :seen, :], {})
            have = want.copy()
            looks += 1
            for n in sorted(set(have.tolist())):
                index = np.flatnonzero(have == n)
                key = "" if seen == size else " seen"
                _, sd, var_test, var_test_seed = combine_parts(parts["d" + key][index, :n], parts["i" + key][index, :n])
                sentence, shared = split_variance(var_test, var_test_seed, n)
                comps = power_mod.Components(sd ** 2, sentence, shared, seen, n)
                pilot = looks == 1
                planned = power_mod.needed(plan_effect, comps if interim == "plug-in" and not pilot else comps.upper(),
                                           size)
                if no_plan == "continue":
                    planned = np.where(planned < 0, rule.max_seeds + 1, planned)
                if pilot:
                    out["pilot_plan"][start + index] = planned
                    booked[index] = planned
                elif interim == "pilot":
                    planned = booked[index]
                elif interim == "grow":
                    booked[index] = planned = np.maximum(booked[index], planned)
                for i, plan in zip(index, planned.tolist()):
                    step = rule.next(n, None if plan < 0 else plan)
                    want[i] = step.seeds
                    out["stopped"][start + i] = STOPS.index(step.stopped)
        for n in sorted(set(have.tolist())):
            index = np.flatnonzero(have == n)
            delta, sd, var_test, var_test_seed = combine_parts(parts["d"][index, :n], parts["i"][index, :n])
            out["p"][start + index] = p_values(delta, sd, var_test, var_test_seed, n, size)[0]
            out["delta"][start + index], out["seeds"][start + index] = delta, n
    return out


def family(pool: Pool, setting: Setting, rows: int, comparisons: int, seed: int = 0, chunk: int = 2_000_000):
    """``comparisons`` sweeps of ``rows`` rows sharing one baseline (a Table 4 of ``rows`` + 1
    placements), every row ``setting.effect`` above it, vectorised in chunks of about ``chunk``
    sentences x seeds x systems. Returns the verdict's parts of each row against the baseline,
    ``(delta, sd_diff, var_test, var_test_seed)``, arrays ``(comparisons, rows)``: any test's
    p-values follow from them (``verdict.p_values``), Holm over the rows from those."""
    rng = np.random.default_rng(seed)
    n, size = setting.seeds, setting.sentences
    out = [np.full((comparisons, rows), np.nan) for _ in range(4)]
    step = max(1, chunk // ((rows + 1) * n * size))
    for start in range(0, comparisons, step):
        part = slice(start, min(start + step, comparisons))
        stats = _outputs(pool, setting, part.stop - part.start, rng, systems=rows + 1)[0]
        for whole, got in zip(out, test_parts(stats[:, 1:], stats[:, :1], {})):
            whole[part] = got
    return tuple(out)


def holm_rejects(p, alpha: float = ALPHA) -> np.ndarray:
    """Holm's step-down rejections of the rows (last axis) of ``p``, boolean of the same shape:
    the k-th smallest p rejects below alpha / (m - k + 1) while every smaller one rejected (the
    verdict's: Holm-adjusted p below alpha)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, -1)
    passed = np.cumprod(ranked < alpha / (m - np.arange(m)), axis=-1).astype(bool)
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, passed, -1)
    return out


SEQUENTIAL_STOPS = ("", "efficacy", "futility", "max_seeds")   # ``sequential``'s ``stopped``: an index into this


def sequential(pool: Pool, setting: Setting, design, plan_effect: float, rows: int = 1, comparisons: int = 1000,
               seed: int = 0, batch_seeds: int = 2, chunk: int = 100):
    """``comparisons`` sweeps of ``rows`` rows sharing one baseline, every row ``setting.effect``
    above it (or row r ``setting.effect[r]``: a family of true nulls and true effects), run by the
    group sequential design (``posenc.stats.sequential``) as the sweeper runs it: the pilot's
    ``design.pilot_seeds`` seeds, then a look after every batch of ``batch_seeds`` (the last batch
    only up to max_seeds); at each look every running row's comparison with the
    baseline is the verdict's test on all its seeds so far (``verdict.p_values``, its components as
    the report takes them), and ``sequential.decide`` (graphical Holm over the rows, futility at
    ``plan_effect``, the decisions taken frozen) says which rows stop. The baseline runs while any
    row does. ``setting.seeds`` is not used. Returns arrays ``(comparisons, rows)``: ``verdict``
    (+1 better, -1 worse, 0 no evidence), ``seeds`` (the seeds the row ran), ``stopped`` (index into
    SEQUENTIAL_STOPS), ``delta`` (Δ at the stop); and ``baseline_seeds`` ``(comparisons,)``."""
    from dataclasses import replace

    from posenc.stats.sequential import EFFICACY, Look, decide
    from posenc.stats.verdict import BETTER, WORSE, combine_parts, seed_parts, split_variance

    rng = np.random.default_rng(seed)
    size, most, names = setting.sentences, design.max_seeds, [f"row {r}" for r in range(rows)]
    out = {"verdict": np.zeros((comparisons, rows), dtype=int), "seeds": np.zeros((comparisons, rows), dtype=int),
           "stopped": np.zeros((comparisons, rows), dtype=int), "delta": np.full((comparisons, rows), np.nan),
           "baseline_seeds": np.zeros(comparisons, dtype=int)}
    for start in range(0, comparisons, chunk):
        count = min(chunk, comparisons - start)
        diffs, influence = np.zeros((count, rows, most)), np.zeros((count, rows, most, size))
        looks = [{name: [] for name in names} for _ in range(count)]
        frozen = [{} for _ in range(count)]
        active, have, sweeps = np.arange(count), 0, None
        while len(active) and have < most:
            want = design.pilot_seeds if have == 0 else min(have + batch_seeds, most)
            stats, made = _outputs(pool, replace(setting, seeds=want - have), len(active), rng,
                                   None if sweeps is None else sweeps.take(active), systems=rows + 1)
            sweeps = made if sweeps is None else sweeps
            d, i = seed_parts(stats[:, 1:], stats[:, :1], {})
            diffs[active, :, have:want], influence[active, :, have:want] = d, i
            have = want
            delta, sd, var_test, var_test_seed = combine_parts(diffs[active, :, :have], influence[active, :, :have])
            p, se, df = p_values(delta, sd, var_test, var_test_seed, have, size)
            shared = split_variance(var_test, var_test_seed, have)[1]
            still = []
            for a, sweep in enumerate(active.tolist()):
                for r, name in enumerate(names):
                    if name not in frozen[sweep]:
                        looks[sweep][name].append(Look(have, float(delta[a, r]), float(se[a, r]), float(df[a, r]),
                                                       float(p[a, r]), float(sd[a, r]) ** 2, float(shared[a, r]), size))
                decisions = decide(design, plan_effect, looks[sweep], frozen[sweep])
                for r, name in enumerate(names):
                    decision = decisions[name]
                    if name in frozen[sweep] or not decision.stopped:
                        continue
                    frozen[sweep][name] = decision
                    at = start + sweep
                    out["seeds"][at, r], out["delta"][at, r] = have, decision.look.delta
                    out["stopped"][at, r] = SEQUENTIAL_STOPS.index(decision.stopped)
                    if decision.stopped == EFFICACY:
                        out["verdict"][at, r] = {BETTER: 1, WORSE: -1}[decision.verdict]
                if len(frozen[sweep]) < rows:
                    still.append(sweep)
                else:
                    out["baseline_seeds"][start + sweep] = have
            active = np.asarray(still, dtype=int)
    return out


def normal_family(design, effects, plan_effect: float, sweeps: int, shared: float = 0.0, seed: int = 0,
                  sentences: int = 1000, batch_seeds: int = 1) -> list:
    """``sweeps`` sweeps of rows sharing one baseline in normal theory, run by the group sequential
    design as the sweeper runs it (``sequential.decide`` after the pilot and after every batch, the
    decisions taken frozen, futility at ``plan_effect``): row r's seeds score θ_r + N(0, 1/2) and
    the baseline's N(0, 1/2), so each d_s has the seeds' variance 1 and two rows' d_s correlate 0.5
    through the baseline; each system's test-set draw is N(0, shared/2) once per sweep, so each
    d_s holds a shared part of variance ``shared`` (taken as known, from ``sentences``: the
    verdict's p, ``verdict.p_values``). ``effects``: θ_r per row (σ units). Returns, per sweep,
    ``{row index: its final Decision}``."""
    from posenc.stats.sequential import Decision, Look, decide

    rng = np.random.default_rng(seed)
    theta, most = np.asarray(effects, dtype=float), design.max_seeds
    scores = rng.standard_normal((sweeps, len(theta) + 1, most)) * np.sqrt(0.5)
    scores += rng.standard_normal((sweeps, len(theta) + 1, 1)) * np.sqrt(shared / 2)
    d = scores[:, 1:] - scores[:, :1] + theta[None, :, None]          # (sweeps, rows, most)
    out = []
    for s in range(sweeps):
        looks, frozen, have = {r: [] for r in range(len(theta))}, {}, 0
        while len(frozen) < len(theta) and have < most:
            have = design.pilot_seeds if have == 0 else min(have + batch_seeds, most)
            x = d[s, :, :have]
            sd = x.std(1, ddof=1)
            p, se, df = p_values(x.mean(1), sd, shared, shared, have, sentences)
            for r in looks:
                if r not in frozen:
                    looks[r].append(Look(have, float(x[r].mean()), float(se[r]), float(df[r]), float(p[r]),
                                         float(sd[r]) ** 2, float(shared), sentences))
            frozen.update({r: v for r, v in decide(design, plan_effect, looks, frozen).items() if v.stopped})
        out.append({r: frozen.get(r, Decision("", "", "", looks[r][-1])) for r in looks})
    return out
