#!/usr/bin/env python
"""Calibrate the verdict and validate the seed planner by simulation on real text.

Systems are the references of a real corpus corrupted word by word (posenc.stats.simulate), at a
rate set per system and seed so that a system's corpus BLEU has the seed spread asked for; their
sentence errors are partly shared (``--noise``, default "partly shared"). Its parts (``--only``):

- null: the false-positive rate at α = 0.05 of the verdict (guarded Welch-Satterthwaite df), of
  the same se on t(n - 1) (before issue 22), of plain Satterthwaite, and of today's * (sacreBLEU's
  paired bootstrap on the concatenated outputs), over seed sds, seeds and test sizes;
- effects: the power at 0.5, 1 and 2 BLEU, before and after the df change;
- planning: pilots of 3 and 5 seeds on PILOT_SIZE sentences, of rows that truly differ by Δ, plan
  the seeds for Δ, which the truth needs 6 seeds for, at the pilot's size and at 3 and 6 times it,
  with the seeds' own part 0, equal to and 4 times the sentence part; the power the booked seeds
  really deliver (the sweeps they book, simulated, and the test's power at the world's true
  components, measured by simulating the world at that size and Δ), its mean over the pilots, and
  the median booking against the truth's plan; the same for the plug-in;
- holm (not run by default; issue 30, item 4): tables of 3 rows sharing a baseline, no row
  different, at 3, 5 and 10 seeds in the planning part's worlds (the seeds' part 0, 1 and 4 times
  the sentence part) at 500 and 1,500 sentences (and 3,003 at 3 seeds): the tail P(p <= α/m) for
  m = 1..5 and Holm's family-wise rate, with the df guard before issue 30 (75%) and today's;
- holm-power (not run by default): what that costs: the power of fixed designs of 3, 5 and 10
  seeds, one row alone and under Holm over three, before and after;
- booking (not run by default; issue 30, item 8): 3-seed pilots on 500 sentences planned for
  2,000, where the truth needs 11 seeds: the power each pilot's booking delivers at the truth,
  its lowest, the share under 0.5 and the seeds booked, before issue 30 and now;
- adaptive (not run by default): the seeds strategy (``posenc.stats.old_seeds_rule.SeedsRule``, pilot 3,
  batches of 2, min_seeds 7 unless --min-seeds) as a sweep runs it, in the planning part's worlds
  at 1 and 3 times the pilot's sentences plus one where max_seeds binds: sweeps at Δ = 0 and at
  the planned Δ, re-planned after every batch, tested by the verdict at the stop
  (``posenc.stats.simulate.adaptive``); the false-positive rate, the delivered power and the
  seeds used against the truth's plan;
- sequential (not run by default): the group sequential design (``posenc.stats.sequential``,
  its defaults, batches of 2) as a sweep runs it (``posenc.stats.simulate.sequential``), one row
  and three rows sharing a baseline, in the adaptive part's worlds at 1 and 3 times the pilot's
  sentences with max_seeds 10: the family-wise false-positive rate, the power and seeds per row
  at the planned Δ and 2, 5 and 20 times it, the fixed design of the same power, and today's rule
  (SeedsRule, max_seeds 10) beside it;
- depth (not run by default; issue 38, item 2): the verdict's t under the null at levels α/1..α/5
  against the thresholds simulated for it and for the seeds-only t, over the test set's shared part
  (normal seeds, no corpus);
- mixed (not run by default; issue 38, item 6): families of 3, 4 and 5 rows sharing a baseline,
  some at E or 5E and the others true nulls, where a rejection passes its α on to the nulls: the
  family-wise error (any null row called better or worse), the true rows' power and seeds.
- coverage (not run by default; issue 60, item 1): two rows sharing a baseline, one null and one
  1.2, 1.6 or 2.5 σ better, run by the design's own ``decide``: how often each repeated CI misses
  its row's truth, against its label (α/m) and against the level Holm passed on (normal seeds);
- estimates (not run by default; issue 60, item 2): the median-unbiased Δ the table reports at
  every stop, over all outcomes and given each stop type, at true Δ 0 to 2 σ (normal seeds);
- stagewise (not run by default; issue 49, item 2): the stage-wise p of a row under the null with a
  test-set shared part, the pilot's look included (normal seeds, no corpus);
- secondary (not run by default; issue 49, item 1): a secondary metric of a sequential row, correlated
  ρ with BLEU and truly 0, as the table tested it before (fixed-sample, at 0.05, on the stopping
  look's seeds) and as it reports it now (an estimate with that interval, no verdict) (normal seeds,
  no corpus);

Every test set is made of distinct sentences of REFERENCES (its first --pool lines), so the
largest size must not exceed it.

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python scripts/calibrate_significance.py \\
        ../shared/data/multi30k/train.en.gz --out results/significance_calibration_tables.md
"""

import argparse
import gzip
import itertools
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize

from posenc.atomic import write_text_atomic
from posenc.stats import power as power_mod
from posenc.stats.simulate import NOISE, Pool, Setting, family, holm_rejects, rejection_rate, simulate
from posenc.stats.verdict import ALPHA, DF_GUARD, guard_factor, p_values, split_variance

RATES = np.round(np.linspace(0.0, 0.7, 15), 4)
NULL_TESTS = (("p", "verdict (df: guarded W-S)"), ("p_before", "before: t(n-1)"),
              ("p_plain", "plain W-S df"), ("p_star", "today's * (sacreBLEU paired bs)"))
SEEDS, SIZES, SEED_SDS, EFFECTS = (3, 5, 10), (500, 1000, 3003), (0.2, 0.5, 1.0, 2.0, 5.0), (0.5, 1.0, 2.0)
PILOT_SIZE, PILOTS, RATIOS, FACTORS, TRUTH_SEEDS = 500, (3, 5), (0.0, 1.0, 4.0), (1, 3, 6), 6


def read_references(path: Path, count: int) -> list:
    opener = gzip.open if path.suffix == ".gz" else open
    lines = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines.append(line.rstrip("\n"))
            if len(lines) == count:
                break
    return lines


def table(header, rows) -> list:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def null_part(pool, noise, comparisons, star, seed, seeds=SEEDS):
    rows = []
    for i, (n, size, sd) in enumerate(itertools.product(seeds, SIZES, SEED_SDS)):
        i += 100 * SEEDS.index(n)     # each setting's own random stream, whichever seeds a run covers
        result = simulate(pool, Setting(n, size, sd, 0.0, noise), comparisons, seed=seed + i, star_comparisons=star)
        rows.append([str(n), str(size), f"{sd:g}", f"{np.nanmean(result['seed_bleu_sd']):.2f}", str(comparisons)] +
                    [f"{rejection_rate(result[key]):.3f}" for key, _ in NULL_TESTS])
        print(" | ".join(rows[-1]), flush=True)
    return table(["seeds", "sentences", "seed sd (rate)", "measured seed sd", "comparisons"] +
                 [label for _, label in NULL_TESTS], rows)


def effects_part(pool, noise, comparisons, seed_sd, seed):
    rows = []
    for i, (n, size, effect) in enumerate(itertools.product(SEEDS, SIZES, EFFECTS)):
        result = simulate(pool, Setting(n, size, seed_sd, effect, noise), comparisons, seed=seed + i)
        rows.append([str(n), str(size), f"{effect:g}", f"{np.nanmean(result['delta']):+.2f}", str(comparisons),
                     f"{rejection_rate(result['p_before']):.3f}", f"{rejection_rate(result['p']):.3f}"])
        print(" | ".join(rows[-1]), flush=True)
    return table(["seeds", "sentences", "true Δ", "mean Δ", "comparisons", "power before: t(n-1)",
                  "power after: guarded W-S"], rows)


def world_parts(pool, noise, size, seed, effect=0.0, sweeps=200, seeds=10):
    """The world's sentence parts at ``size`` sentences (sentence_var, shared_var) where the row is
    ``effect`` BLEU above its baseline (they depend on it: at 0 both systems corrupt a shared
    sentence alike), averaged over many simulated sweeps of many seeds: the truth the planner is
    judged against."""
    result = simulate(pool, Setting(seeds, size, 0.0, effect, noise), sweeps, seed=seed)
    sentence, shared = split_variance(result["var_test"], result["var_test_seed"], seeds)
    return float(np.mean(sentence)), float(np.mean(shared))


def effect_needing(seeds, spread, shared, size) -> float:
    """The difference that ``seeds`` seeds find with the planner's target power at these components."""
    return float(optimize.brentq(lambda d: power_mod.power_of(d, seeds, spread, shared, size) - power_mod.POWER,
                                 1e-6, 100))


def delivered(pool, noise, bookings, seed_sd, effect, size, seed) -> float:
    """The power the booked seeds really deliver, averaged over the pilots: one sweep per pilot on
    the planned test set, with the seeds it booked, tested by the verdict."""
    rejected = []
    for i, seeds in enumerate(sorted(set(bookings.tolist()))):
        count = int(np.sum(bookings == seeds))
        rejected += list(simulate(pool, Setting(int(seeds), size, seed_sd, effect, noise), count, seed=seed + i)["p"]
                         < 0.05)
    return float(np.mean(rejected))


def planning_part(pool, noise, pilots, seed, direct=300):
    """Pilots of rows that truly differ by Δ plan for Δ; the plans are judged by the sweeps they
    book (one per pilot, for the first ``direct`` pilots; half as many at 6 times the sentences) and
    by the test's power at the world's true components (all pilots)."""
    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed)[0]
    worlds = {}
    for ratio, factor in itertools.product(RATIOS, FACTORS):
        # Δ such that the truth needs TRUTH_SEEDS seeds, with the world's parts measured at that Δ.
        size, seed_var, effect = PILOT_SIZE * factor, ratio * sentence_n, 0.0
        for _ in range(2):
            sentence, shared = world_parts(pool, noise, size, seed + factor, effect)
            effect = effect_needing(TRUTH_SEEDS, seed_var + sentence, shared, size)
        worlds[(ratio, factor)] = (effect, seed_var + sentence, shared)
    rows = []
    for i, (ratio, n, factor) in enumerate(itertools.product(RATIOS, PILOTS, FACTORS)):
        size = PILOT_SIZE * factor
        effect, spread, shared = worlds[(ratio, factor)]
        seed_sd = float(np.sqrt(ratio * sentence_n / 2))   # per system: d_s holds two systems' seeds
        truth_plan = int(power_mod.plan(effect, spread, shared, size))
        pilot = simulate(pool, Setting(n, PILOT_SIZE, seed_sd, effect, noise), pilots, seed=seed + 100 + i)
        sentence, shared_hat = split_variance(pilot["var_test"], pilot["var_test_seed"], n)
        comps = power_mod.Components(pilot["sd_diff"] ** 2, sentence, shared_hat, PILOT_SIZE, n)
        booked, plug_in = (np.where(s < 0, power_mod.MAX_SEEDS, s) for s in
                           (power_mod.plan(effect, *c.at(size), size) for c in (comps.upper(), comps)))
        swept = direct // 2 if factor == max(FACTORS) else direct
        cells = [f"{ratio:g}", str(n), f"{PILOT_SIZE} → {size}", f"{effect:.2f}", str(truth_plan), str(pilots)]
        cells += [f"{delivered(pool, noise, booked[:swept], seed_sd, effect, size, seed + 1000 * (i + 1)):.3f}"
                  f" ({swept})"]
        for seeds in (booked, plug_in):
            power = power_mod.power_of(effect, seeds, spread, shared, size)
            cells += [f"{power.mean():.3f}", f"{np.mean(power < 0.5):.2f}", f"{np.median(seeds):.0f}",
                      f"{np.median(seeds) / truth_plan:.1f}x"]
        cells.insert(11, f"{np.mean(booked > power_mod.WIDE * plug_in):.2f}")
        rows.append(cells)
        print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "pilot seeds", "sentences (pilot → planned)", "Δ (truth needs 6)",
              "truth's plan", "pilots", "booked: power delivered (sweeps booked, first pilots)",
              "booked: mean power at the truth", "booked: share < 0.5", "booked: median seeds", "booked / truth",
              "booked: 'cannot pin down'", "plug-in: mean power at the truth", "plug-in: share < 0.5",
              "plug-in: median seeds", "plug-in / truth"]
    return table(header, rows), {f: worlds[(1.0, f)] for f in FACTORS}


HOLM_ROWS, HOLM_MS, BEFORE_GUARD = 3, (1, 2, 3, 4, 5), 0.75   # BEFORE_GUARD: DF_GUARD before issue 30
HOLM_SIZES = {3: (500, 1500, 3003), 5: (500, 1500), 10: (500, 1500)}   # where each seed count is calibrated
HOLM_POWER_SIZES = (500, 1500)


def holm_worlds(pool, noise, seed):
    """The planning part's worlds for the Holm part: (ratio, size, seed_sd) with the seeds' part of
    d_s 0, 1 and 4 times the sentence part at PILOT_SIZE sentences."""
    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed)[0]
    return [(ratio, float(np.sqrt(ratio * sentence_n / 2))) for ratio in RATIOS]


def _holm_p(parts, n, size):
    """(before, now): the verdict's p of every row, with the df guard before issue 30 and today's."""
    before = p_values(*parts, n, size, guard=guard_factor(n, BEFORE_GUARD))[0]
    return before, p_values(*parts, n, size)[0]


def holm_part(pool, noise, sweeps, seed, ratios=RATIOS):
    """Tables of rows sharing one baseline, HOLM_ROWS rows + the baseline (a 4-row Table 4), no row
    different: the tail P(p <= α/m) of one row's p for m in HOLM_MS (the level Holm tests the first
    of m rows at; pooled over the table's rows), and the family-wise rate of Holm over k null rows
    (k = 3: every row null; k < 3: the others so far off that Holm rejects them first, which
    leaves the k null rows tested at α/k and below), before and after issue 30. ``sweeps``: tables
    per world at 3 seeds (a quarter of that at 5 and 10 seeds, half at 3,003 sentences). ``ratios``:
    the worlds run (each keeps its own random streams, so a study can be split over processes)."""
    rows = []
    for i, ((ratio, seed_sd), n) in enumerate(itertools.product(holm_worlds(pool, noise, seed), SEEDS)):
        for j, size in enumerate(HOLM_SIZES[n] if ratio in ratios else ()):
            count = sweeps // (4 if n > 3 else 2 if size > 2000 else 1)
            parts = family(pool, Setting(n, size, seed_sd, 0.0, noise), HOLM_ROWS, count, seed=seed + 10 * i + j)
            cells = [f"{ratio:g}", str(n), str(size), str(count)]
            for p in _holm_p(parts, n, size):
                cells += [" / ".join(f"{np.mean(p <= ALPHA / m) / (ALPHA / m):.2f}" for m in HOLM_MS)]
                cells += [" / ".join(f"{np.mean(holm_rejects(p[:, :k]).any(-1)):.4f}" for k in (3, 2, 1))]
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    ms = ", ".join(map(str, HOLM_MS))
    header = ["seeds' part / sentence part", "seeds", "sentences", "tables"]
    for when in (f"before (guard {BEFORE_GUARD:.0%})", f"now (guard {DF_GUARD:.0%})"):
        header += [f"{when}: P(p <= α/m) / (α/m), m = {ms}", f"{when}: family-wise rate, 3 / 2 / 1 null rows"]
    return table(header, rows)


def holm_power_part(pool, noise, sweeps, seed):
    """The power the mend costs: tables of HOLM_ROWS rows all Δ above their baseline, fixed designs
    of 3, 5 and 10 seeds, with Δ per world such that today's planned power at 5 seeds is 0.8; the
    power of one row alone (α) and of each row under Holm over the three, before and after."""
    rows = []
    for i, ((ratio, seed_sd), size) in enumerate(itertools.product(holm_worlds(pool, noise, seed), HOLM_POWER_SIZES)):
        sentence, shared = world_parts(pool, noise, size, seed + size, 0.0)
        effect = effect_needing(5, 2 * seed_sd ** 2 + sentence, shared, size)
        for n in SEEDS:
            parts = family(pool, Setting(n, size, seed_sd, effect, noise), HOLM_ROWS, sweeps,
                           seed=seed + 100 * i + n)
            cells = [f"{ratio:g}", str(size), f"{effect:.2f}", str(n), str(sweeps)]
            for p in _holm_p(parts, n, size):
                cells += [f"{np.mean(p[:, 0] <= ALPHA):.3f}", f"{np.mean(holm_rejects(p)):.3f}"]
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "sentences", "Δ (5 seeds: 0.8 planned)", "seeds", "tables",
              "before: power, one row", "before: power, Holm over 3", "now: power, one row", "now: power, Holm over 3"]
    return table(header, rows)


# The held-out check of issue 30, item 8: 3-seed pilots on PILOT_SIZE sentences planned for a test set
# 4 times larger, where the truth needs 11 seeds.
HELD_OUT_PILOT, HELD_OUT_FACTOR, HELD_OUT_TRUTH = 3, 4, 11


def booking_part(pool, noise, pilots, seed, direct=100):
    """Pilots of HELD_OUT_PILOT seeds plan for HELD_OUT_FACTOR times their sentences, in the worlds
    of the planning part (the seeds' part 0, 1 and 4 times the sentence part) with Δ such that the
    truth needs HELD_OUT_TRUTH seeds there; the booking before issue 30 (``upper(cover=False)``)
    and now (``upper()``), judged by the power of each pilot's booking at the world's true
    components (every pilot) and by the sweeps they book (the first ``direct`` pilots)."""
    n, size = HELD_OUT_PILOT, PILOT_SIZE * HELD_OUT_FACTOR
    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed)[0]
    rows = []
    for i, ratio in enumerate(RATIOS):
        seed_var, effect = ratio * sentence_n, 0.0
        for _ in range(2):
            sentence, shared = world_parts(pool, noise, size, seed + HELD_OUT_FACTOR, effect)
            effect = effect_needing(HELD_OUT_TRUTH, seed_var + sentence, shared, size)
        spread = seed_var + sentence
        truth_plan = int(power_mod.plan(effect, spread, shared, size))
        seed_sd = float(np.sqrt(seed_var / 2))   # per system: d_s holds two systems' seeds
        pilot = simulate(pool, Setting(n, PILOT_SIZE, seed_sd, effect, noise), pilots, seed=seed + 100 + i)
        sentence_hat, shared_hat = split_variance(pilot["var_test"], pilot["var_test_seed"], n)
        comps = power_mod.Components(pilot["sd_diff"] ** 2, sentence_hat, shared_hat, PILOT_SIZE, n)
        cells = [f"{ratio:g}", f"{PILOT_SIZE} → {size}", f"{effect:.2f}", str(truth_plan), str(pilots)]
        for k, upper in enumerate((comps.upper(cover=False), comps.upper())):
            booked = power_mod.plan(effect, *upper.at(size), size)
            booked = np.where(booked < 0, power_mod.MAX_SEEDS, booked)
            power = power_mod.power_of(effect, booked, spread, shared, size)
            swept = delivered(pool, noise, booked[:direct], seed_sd, effect, size, seed + 1000 * (2 * i + k + 1))
            cells += [f"{power.mean():.3f}", f"{power.min():.3f}", f"{np.mean(power < 0.5):.3f}",
                      f"{swept:.3f} ({min(direct, pilots)})", f"{np.median(booked):.0f}", f"{booked.mean():.1f}"]
        rows.append(cells)
        print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "sentences (pilot → planned)", f"Δ (truth needs {HELD_OUT_TRUTH})",
              "truth's plan", "pilots"]
    for when in ("before", "now"):
        header += [f"{when}: mean power at the truth", f"{when}: lowest", f"{when}: share < 0.5",
                   f"{when}: power delivered (sweeps booked)", f"{when}: median seeds", f"{when}: mean seeds"]
    return table(header, rows)


ADAPTIVE_FACTORS, ADAPTIVE_MAX, BINDING = (1, 3), 100, (1.0, 1, 6)   # BINDING: (ratio, factor, max_seeds)


def adaptive_world(pool, noise, ratio, factor, seed, sentence_n):
    """An adaptive part's world: ``(sentences, Δ, spread, shared, seed_sd)``, the test set PILOT_SIZE x
    ``factor``, the seeds' own part ``ratio`` times the pilot-size sentence part ``sentence_n``, and
    Δ such that the truth needs TRUTH_SEEDS there (its parts measured at that Δ, 100 sweeps of 10
    seeds); seed_sd per system (d_s holds two systems' seeds)."""
    size, seed_var, effect = PILOT_SIZE * factor, ratio * sentence_n, 0.0
    for _ in range(2):
        sentence, shared = world_parts(pool, noise, size, seed + factor, effect, sweeps=100)
        effect = effect_needing(TRUTH_SEEDS, seed_var + sentence, shared, size)
    return size, effect, seed_var + sentence, shared, float(np.sqrt(ratio * sentence_n / 2))


def adaptive_part(pool, noise, comparisons, seed, quick=False, interim="booking", min_seeds=7):
    """The seeds strategy as a sweep runs it (``SeedsRule``, pilot 3, batches of 2, ``min_seeds``,
    capped by max_seeds): per world (as in
    the planning part: the truth needs TRUTH_SEEDS at the planned size), ``comparisons`` sweeps at
    Δ = 0 (false-positive rate) and as many at the planned Δ (delivered power, seeds used), against
    the fixed design of the truth's plan. ``quick``: one world, for a test of the script."""
    from posenc.stats.old_seeds_rule import SeedsRule
    from posenc.stats.simulate import STOPS, adaptive

    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed, sweeps=100)[0]
    settings = [(r, f, ADAPTIVE_MAX) for r, f in itertools.product(RATIOS, ADAPTIVE_FACTORS)] + [BINDING]
    rows = []
    for i, (ratio, factor, most) in enumerate(settings[:1] if quick else settings):
        size, effect, spread, shared, seed_sd = adaptive_world(pool, noise, ratio, factor, seed, sentence_n)
        truth_plan = int(power_mod.plan(effect, spread, shared, size))
        rule = SeedsRule(pilot_seeds=3, max_seeds=most, batch_seeds=2, min_seeds=min_seeds)
        null, alt = (adaptive(pool, Setting(0, size, seed_sd, delta, noise), rule, effect, PILOT_SIZE, comparisons,
                              seed=seed + 10 * i + k, interim=interim) for k, delta in enumerate((0.0, effect)))
        used = alt["seeds"]
        cells = [f"{ratio:g}", f"{PILOT_SIZE} → {size}", f"{effect:.2f}", str(truth_plan), str(most), str(comparisons),
                 f"{np.mean(null['p'] < 0.05):.3f}", f"{np.mean(alt['p'] < 0.05):.3f}",
                 f"{used.mean():.1f}", " / ".join(f"{q:.0f}" for q in np.quantile(used, (0.1, 0.5, 0.9))),
                 f"{used.mean() / truth_plan:.1f}x", f"{null['seeds'].mean():.1f}",
                 f"{np.median(alt['pilot_plan'][alt['pilot_plan'] > 0]):.0f}",
                 f"{np.mean(alt['stopped'] == STOPS.index('max_seeds')):.2f}",
                 f"{np.mean(alt['stopped'] == STOPS.index('no plan')):.2f}"]
        rows.append(cells)
        print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "sentences (plan sees → verdict's)", "Δ (truth needs 6)",
              "fixed design: truth's plan", "max_seeds", "sweeps per Δ", "false-positive rate (Δ = 0)",
              "delivered power (Δ)", "mean seeds (Δ)", "seeds 10% / 50% / 90% (Δ)", "mean / fixed design",
              "mean seeds (Δ = 0)", "pilot's booking (median)", "stopped at max_seeds", "stopped: no plan"]
    return table(header, rows)


SEQUENTIAL_MULTIPLES = (1, 2, 5, 20)     # the effects simulated, as multiples of the planned Δ


def fixed_same_power(effect, power, spread, shared, size) -> int:
    """The fewest seeds of the fixed design (the verdict's test at α, no multiplicity) whose power
    at ``effect`` reaches ``power`` (0.99 at most: near 1 a rate is all noise); -1 beyond MAX_SEEDS."""
    seeds = np.arange(2, power_mod.MAX_SEEDS)
    reached = power_mod.power_of(effect, seeds, spread, shared, size) >= min(power, 0.99)
    return int(seeds[np.argmax(reached)]) if reached.any() else -1


def fixed_same_power_simulated(pool, noise, size, seed_sd, effect, rows, power, guess, sweeps, seed) -> int:
    """The fewest seeds of the fixed design as users run it (every row ``guess``..n seeds, the
    verdict's test once, Holm over the ``rows`` rows: ``simulate.sequential`` with one look at n)
    whose simulated power at ``effect`` reaches ``power`` (0.99 at most); -1 beyond 40 seeds."""
    from posenc.stats.sequential import Design
    from posenc.stats.simulate import sequential

    target, measured = min(power, 0.99), {}

    def reaches(n):
        if n not in measured:
            run = sequential(pool, Setting(0, size, seed_sd, effect, noise), Design(pilot_seeds=n, max_seeds=n),
                             effect, rows, sweeps, seed=seed + n)
            measured[n] = float(np.mean(run["verdict"] == 1))
        return measured[n] >= target

    n = max(2, guess)
    if reaches(n):
        while n > 2 and reaches(n - 1):
            n -= 1
        return n
    while not reaches(n):      # up in steps of 2, then back one
        n += 2
        if n > 40:
            return -1
    return n - 1 if reaches(n - 1) else n


def sequential_part(pool, noise, null, alt, old, seed, quick=False, batch_seeds=2, fixed_sweeps=800, gamma=None):
    """The group sequential design (``posenc.stats.sequential.Design()``'s defaults, HSD's γ set to
    ``gamma`` where given, batches of ``batch_seeds``) as a sweep runs it
    (``simulate.sequential``), one row and three rows sharing a baseline, in the adaptive part's
    worlds (max_seeds 10): ``null`` sweeps at Δ = 0 (the family-wise false-positive rate),
    ``alt`` at the planned Δ and 2Δ and ``alt // 2`` at 5Δ and 20Δ (every row at that Δ); beside
    it today's rule (SeedsRule: pilot 3, batches 2, min_seeds 7, max_seeds 10; one row, ``old``
    sweeps per Δ) and the fixed design of the same power, by the verdict's power formula at α
    (no multiplicity: a lower bound) and simulated with Holm over the rows (``fixed_sweeps``
    sweeps per seed count tried)."""
    from posenc.stats.old_seeds_rule import SeedsRule
    from posenc.stats.sequential import Design, sequential_power
    from posenc.stats.simulate import SEQUENTIAL_STOPS, adaptive, sequential

    design = Design() if gamma is None else Design(gamma=gamma)
    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed, sweeps=100)[0]
    worlds = list(itertools.product(RATIOS, ADAPTIVE_FACTORS))
    rows = []
    for i, (ratio, factor) in enumerate(worlds[:1] if quick else worlds):
        size, effect, spread, shared, seed_sd = adaptive_world(pool, noise, ratio, factor, seed, sentence_n)
        rule = SeedsRule(pilot_seeds=3, max_seeds=design.max_seeds, batch_seeds=2, min_seeds=7)
        today = [adaptive(pool, Setting(0, size, seed_sd, delta, noise), rule, effect, size, old,
                          seed=seed + 100 * i + 50 + k) for k, delta in enumerate((0.0, effect))]
        for rows_n in (1, 3):
            cap = sequential_power(design, effect, spread, shared, size, design.alpha / rows_n)
            runs = {}
            for k, multiple in enumerate((0, *SEQUENTIAL_MULTIPLES)):
                count = null if multiple == 0 else (alt if multiple <= 2 else max(alt // 2, 1))
                runs[multiple] = sequential(pool, Setting(0, size, seed_sd, multiple * effect, noise), design, effect,
                                            rows_n, count, seed=seed + 100 * i + 10 * rows_n + k,
                                            batch_seeds=batch_seeds)
            power = {m: float(np.mean(r["verdict"] == 1)) for m, r in runs.items() if m}
            seeds = {m: float(r["seeds"].mean()) for m, r in runs.items()}
            fixed = {m: fixed_same_power(m * effect, power[m], spread, shared, size) for m in (1, 2)}
            simulated = {m: fixed_same_power_simulated(pool, noise, size, seed_sd, m * effect, rows_n, power[m],
                                                       fixed[m], fixed_sweeps, seed + 100 * i + 1000 * m + rows_n)
                         for m in (1, 2)}
            cells = [f"{ratio:g}", str(size), f"{effect:.2f}", str(rows_n), str(null),
                     f"{np.mean((runs[0]['verdict'] != 0).any(1)):.4f}", f"{seeds[0]:.2f}",
                     f"{np.mean(runs[0]['stopped'] == SEQUENTIAL_STOPS.index('futility')):.2f}",
                     f"{power[1]:.3f}", f"{cap:.2f}", f"{seeds[1]:.2f}", f"{fixed[1]} / {simulated[1]}",
                     f"{power[2]:.3f}", f"{seeds[2]:.2f}", f"{fixed[2]} / {simulated[2]}", f"{seeds[5]:.2f}",
                     f"{seeds[20]:.2f}",
                     str(alt)]
            cells += ([f"{np.mean(today[0]['p'] < 0.05):.3f}", f"{today[0]['seeds'].mean():.2f}",
                       f"{np.mean(today[1]['p'] < 0.05):.3f}", f"{today[1]['seeds'].mean():.2f}"]
                      if rows_n == 1 else ["", "", "", ""])
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "sentences", "planned Δ = E (fixed truth needs 6)", "rows",
              "null sweeps", "family-wise false-positive rate (Δ = 0)", "seeds per row (Δ = 0)",
              "futility stops (Δ = 0)", "power at E", "the design's power at E at α/rows (`sequential_power`)",
              "seeds per row (E)",
              "fixed design of that power (E): formula at α / simulated, Holm", "power at 2E", "seeds per row (2E)",
              "fixed design of that power (2E): formula at α / simulated, Holm",
              "seeds per row (5E)", "seeds per row (20E)", "sweeps at E, 2E (half at 5E, 20E)",
              "today's rule: false-positive rate", "today's rule: seeds (Δ = 0)", "today's rule: power at E",
              "today's rule: seeds (E)"]
    return table(header, rows)


DEPTH_SHARED = (0.0, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.3, 1.0)


def depth_part(paths, seed):
    """The verdict's t against the design's thresholds at every depth Holm uses (issue 38, item 2):
    one row at level α/m, m = 1..5, under the null, with a look at every n (pilot 3, N 10). Normal
    seed differences (σ = 1) and one shared test-set draw c ~ N(0, shared) per sweep; each look's p
    is the verdict's (``verdict.p_values``, 1,000 sentences). The rejection rate over α/m, for the
    thresholds simulated for the verdict's t (the default) and for the seeds-only t (before)."""
    from posenc.stats.sequential import Design
    from posenc.stats.verdict import p_values

    rows = []
    for m in range(1, 6):
        level = 0.05 / m
        cells = {}
        for statistic in ("verdict", "seeds"):
            thresholds = Design(statistic=statistic).thresholds(level)
            rates = []
            for j, shared in enumerate(DEPTH_SHARED):
                rng = np.random.default_rng(seed + j)
                d = rng.standard_normal((paths, 1)) * math.sqrt(shared) + rng.standard_normal((paths, 10))
                rejected = np.zeros(paths, dtype=bool)
                for n, a in thresholds.items():
                    x = d[:, :n]
                    rejected |= p_values(x.mean(1), x.std(1, ddof=1), shared, shared, n, 1000)[0] <= a
                rates.append(rejected.mean() / level)
            cells[statistic] = rates
        for statistic in ("verdict", "seeds"):
            row = [f"α/{m}" if m > 1 else "α", {"verdict": "verdict's t (now)", "seeds": "seeds-only t (before)"}[
                statistic], *(f"{r:.3f}" for r in cells[statistic]), f"{max(cells[statistic]):.3f}"]
            rows.append(row)
            print(" | ".join(row), flush=True)
    sd = math.sqrt(0.01 * 0.99 / paths) / 0.01
    header = ["level", "thresholds for", *(f"shared {h:g}" for h in DEPTH_SHARED), "worst"]
    return table(header, rows) + ["", f"Rejection rate / level under the null, {paths:,} sweeps per cell (Monte Carlo "
                                      f"sd of the ratio: {sd:.3f} at α/5, less above); shared: the test set's shared "
                                      f"part in units of the seeds' variance."]


SECONDARY_RHOS = (0.8, 0.9, 0.95)


def _stops(design, d, level: float, effect: float):
    """(the seeds each path stopped at, whether it stopped for efficacy) of the design's looks at
    every n on the seed differences ``d`` (paths, N), the verdict's t without a shared part (the
    seeds' t), at ``level``; futility (non-binding, as the sweeper applies it) by the conditional
    power at ``effect`` projected to N (``sequential.conditional_power``'s formula, vectorised)."""
    from scipy import special

    paths, most = d.shape
    table = design.thresholds(level)
    critical = float(special.stdtrit(most - 1, 1 - table[most] / 2))
    stop, efficacy = np.full(paths, most), np.zeros(paths, dtype=bool)
    going = np.ones(paths, dtype=bool)
    for n, a in table.items():
        x = d[:, :n]
        delta, sd = x.mean(1), x.std(1, ddof=1)
        p = 2 * special.stdtr(n - 1, -np.abs(delta) / (sd / math.sqrt(n)))
        hit = going & (p <= a)
        efficacy |= hit
        stop[hit] = n
        going &= ~hit
        if n >= design.futility_from and n < most:
            info, info_n = n / sd ** 2, most / sd ** 2
            theta = np.copysign(effect, delta)
            mean = (delta * info + theta * (info_n - info)) / info_n
            spread = np.sqrt(info_n - info) / info_n
            bound = critical * sd / math.sqrt(most)
            power = special.ndtr((mean - bound) / spread) + special.ndtr((-bound - mean) / spread)
            quit_ = going & (power < design.futility)
            stop[quit_] = n
            going &= ~quit_
    return stop, efficacy


def secondary_part(paths, seed):
    """A secondary metric of a sequential row as the table reported it before issue 49 (a
    fixed-sample t-test at 0.05 on the stopping look's seeds, with * and better/worse) and as it
    reports it now (an estimate with that 95% interval and no verdict). BLEU's seed differences
    d_s ~ N(θ, 1) run the design's looks at a row's level (α, or α/3: the first of three rows);
    the secondary's e_s = ρ(d_s - θ) + √(1 - ρ²) z_s has true Δ 0. Normal theory, no shared part."""
    from scipy import special

    from posenc.stats.sequential import Design

    design = Design()
    rows = []
    for m in (1, 3):
        for theta in (0.0, 1.0):
            for j, rho in enumerate(SECONDARY_RHOS):
                rng = np.random.default_rng(seed + 10 * m + j + (100 if theta else 0))
                noise = rng.standard_normal((paths, design.max_seeds))
                d = theta + noise
                e = rho * noise + math.sqrt(1 - rho ** 2) * rng.standard_normal((paths, design.max_seeds))
                stop, efficacy = _stops(design, d, 0.05 / m, 1.0)
                upto = np.arange(design.max_seeds) < stop[:, None]
                mean = np.where(upto, e, 0).sum(1) / stop
                sd = np.sqrt(np.where(upto, (e - mean[:, None]) ** 2, 0).sum(1) / (stop - 1))
                p = 2 * special.stdtr(stop - 1, -np.abs(mean) / (sd / np.sqrt(stop)))
                called = p < 0.05                          # the old table's * on the secondary
                bleu_sign = np.sign(np.where(upto, d, 0).sum(1))
                confirms = called & efficacy & (np.sign(mean) == bleu_sign)
                cells = [f"α/{m}" if m > 1 else "α", f"{theta:g}", f"{rho:g}", f"{paths:,}", f"{efficacy.mean():.3f}",
                         f"{stop.mean():.2f}", f"{called.mean():.4f}",
                         f"{confirms.sum() / max(efficacy.sum(), 1):.3f}", "0", f"{1 - called.mean():.4f}"]
                rows.append(cells)
                print(" | ".join(cells), flush=True)
    header = ["row's level", "BLEU's true Δ (seed sd 1; planned effect 1)", "ρ (secondary with BLEU)", "sweeps",
              "BLEU efficacy stops", "seeds at the stop", "before: secondary called better/worse (true Δ 0)",
              "before: of BLEU's efficacy stops, the secondary 'confirms' it", "now: secondary verdicts",
              "now: the secondary's 95% interval covers its true Δ"]
    return table(header, rows)


STAGEWISE_SHARED = (0.0, 0.005, 0.02, 0.08)
STAGEWISE_Q = (0.0005, 0.005, "α_row", 0.2, 0.5)


def stagewise_part(paths, seed):
    """The stage-wise p of a row under the null with a test-set shared part (issue 49, item 2): the
    default design (pilot 3, N 10, a look at every n, no futility: the ordering ignores it) at a
    row's level α and α/3, seed differences N(c, 1) with one shared draw c ~ N(0, shared) per sweep,
    each look's p the verdict's (1,000 sentences). P(stage-wise p <= q) / q, and beside it what the
    pilot's look reported until issue 49 (its own p)."""
    from posenc.stats.sequential import Design, null_stops, stagewise_p

    design, rows = Design(), []
    for m in (1, 3):
        level = design.alpha / m
        bounds = design.thresholds(level)   # (not `table`: that name is the Markdown helper's)
        for j, shared in enumerate(STAGEWISE_SHARED):
            rng = np.random.default_rng(seed + 10 * m + j)
            d = rng.standard_normal((paths, 1)) * math.sqrt(shared) + rng.standard_normal((paths, design.max_seeds))
            stop, p_stop, crossed = null_stops(design, bounds, shared, d)
            ps = np.array([stagewise_p(design, n, p, level) for n, p in zip(stop, p_stop)])
            qs = [level if q == "α_row" else q for q in STAGEWISE_Q]
            pilot = (stop == design.pilot_seeds) & (p_stop <= STAGEWISE_Q[0])
            iff = bool(np.all(ps[crossed] <= level) and np.all(ps[~crossed] >= level))
            cells = [f"α/{m}" if m > 1 else "α", f"{shared:g}", f"{paths:,}", f"{crossed.mean():.4f}",
                     *(f"{(ps <= q).mean() / q:.2f}" for q in qs), "yes" if iff else "no",
                     f"{pilot.mean() / STAGEWISE_Q[0]:.2f}"]
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    header = ["row's level", "shared part (of σ²)", "sweeps", "rejected", *(f"P(p <= {q}) / {q}" for q in STAGEWISE_Q),
              "p <= α_row exactly when rejected", f"before: the pilot's own p, P(p <= {STAGEWISE_Q[0]}) / "
              f"{STAGEWISE_Q[0]} at the pilot's stops"]
    return table(header, rows)


COVERAGE_EFFECTS, COVERAGE_SHARED, PLANNED = (1.2, 1.6, 2.5), 0.02, 1.0   # B's true Δ (σ units); the shared part


def _covers(ci, truth) -> bool:
    return bool(ci[0] <= truth <= ci[1])


def coverage_cells(design, runs, theta) -> list:
    """One row of the coverage part's table from ``runs`` (``simulate.normal_family``, rows A null and
    B ``theta``): where B rejected before A stopped, A was tested at α and an interval at α's
    thresholds (the label 95% before issue 60) against the one at α/2 (A's label now); then each
    row's interval over every sweep, both together, and the family-wise error."""
    from posenc.stats.sequential import repeated_ci

    passed = [r[0] for r in runs if math.isclose(r[0].level, design.alpha)]
    old = np.mean([not _covers(repeated_ci(d.look, design.thresholds(d.level)[d.look.n]), 0.0) for d in passed])
    new = np.mean([not _covers(d.ci, 0.0) for d in passed])
    labels = sorted({f"{100 * (1 - d.ci_level):.1f}%" for r in runs for d in r.values()})
    miss_a, miss_b = (np.mean([not _covers(r[k].ci, t) for r in runs]) for k, t in ((0, 0.0), (1, theta)))
    both = np.mean([_covers(r[0].ci, 0.0) and _covers(r[1].ci, theta) for r in runs])
    fwer = np.mean([r[0].stopped == "efficacy" for r in runs])
    return [f"{theta:g}", f"{len(runs):,}", f"{len(passed) / len(runs):.3f}", f"{old:.4f}", f"{new:.4f}",
            f"{miss_a:.4f}", f"{miss_b:.4f}", " / ".join(labels), f"{both:.4f}", f"{fwer:.4f}",
            f"{3 * math.sqrt(0.025 * 0.975 / max(len(passed), 1)):.4f}"]


def coverage_part(sweeps, seed):
    """Issue 60, item 1: whether each repeated CI covers its row's true Δ as often as its label
    claims. Two rows sharing a baseline (``simulate.normal_family``: normal seeds, each d_s with
    the seeds' variance 1 and a shared part of 0.02, correlated 0.5 through the baseline), run by
    the default design with ``sequential.decide`` (graphical Holm at α/2, α passed on, futility at
    Δ = 1, a look after every seed): row A null, row B 1.2, 1.6 and 2.5 σ better."""
    from posenc.stats.sequential import Design
    from posenc.stats.simulate import normal_family

    design, rows = Design(), []
    for i, theta in enumerate(COVERAGE_EFFECTS):
        runs = normal_family(design, (0.0, theta), PLANNED, sweeps, shared=COVERAGE_SHARED, seed=seed + i)
        rows.append(coverage_cells(design, runs, theta))
        print(" | ".join(rows[-1]), flush=True)
    header = ["B's true Δ (σ)", "sweeps", "A tested at α (B rejected first)",
              "there: A missed by the interval at α (labelled 95% before issue 60)",
              "there: A missed by its interval at α/2 (its label now, 97.5%)", "A missed, every sweep",
              "B missed, every sweep", "labels", "both covered (claim: at least 0.95)",
              "family-wise error (A rejected)", "3 sd of a miss rate of 0.025 where A was tested at α"]
    return table(header, rows)


ESTIMATE_TRUTHS = (0.0, 0.5, 1.0, 2.0)


def estimate_cells(design, runs, theta) -> list:
    """The estimates part's rows for one truth: per stop type (an efficacy stop before N, at N, a
    futility stop, max_seeds) and over all, the share of sweeps, the mean Δ at the stop and the mean
    median-unbiased Δ (as the table gives it), and how often each lies at or above the truth."""
    from posenc.stats.sequential import median_unbiased

    stops = [(r[0], median_unbiased(design, r[0].look, r[0].level)) for r in runs]   # as report.sequential.inference
    kinds = {"efficacy before N": lambda d: d.stopped == "efficacy" and d.look.n < design.max_seeds,
             "efficacy at N": lambda d: d.stopped == "efficacy" and d.look.n == design.max_seeds,
             "futility": lambda d: d.stopped == "futility", "max_seeds": lambda d: d.stopped == "max_seeds",
             "every stop": lambda d: True}
    rows = []
    for kind, chosen in kinds.items():
        got = [(d.look.delta, u) for d, u in stops if chosen(d)]
        if not got:
            continue
        delta, unbiased = np.array(got).T
        rows.append([f"{theta:g}", kind, f"{len(got) / len(runs):.3f}", f"{delta.mean():+.3f}",
                     f"{np.nanmean(unbiased):+.3f}", f"{np.mean(delta >= theta):.3f}",
                     f"{np.nanmean(unbiased >= theta):.3f}"])
    return rows


def estimates_part(sweeps, seed):
    """Issue 60, item 2: the median-unbiased Δ as the table reports it at every stop
    (``sequential.median_unbiased`` at the row's level, as ``report.sequential.inference`` calls it), beside
    Δ at the stop, for one row of the default design (normal seeds, σ² = 1, a shared part of 0.02,
    planned effect 1 σ) at true Δ 0, 0.5, 1 and 2 σ: over all outcomes and given each stop type."""
    from posenc.stats.sequential import Design
    from posenc.stats.simulate import normal_family

    design, rows = Design(), []
    for i, theta in enumerate(ESTIMATE_TRUTHS):
        runs = normal_family(design, (theta,), PLANNED, sweeps, shared=COVERAGE_SHARED, seed=seed + i)
        for cells in estimate_cells(design, runs, theta):
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    header = ["true Δ (σ)", "stop", "share of sweeps", "mean Δ at the stop", "mean median-unbiased Δ",
              "Δ at the stop >= truth", "median-unbiased Δ >= truth"]
    return table(header, rows)


MIXED_FAMILIES = ((5, 5, 0), (1, 0, 0), (5, 5, 0, 0), (1, 1, 0, 0), (5, 5, 5, 0, 0), (1, 0, 0, 0, 0))
MIXED_WORLDS = ((1, 1), (4, 3))     # (seeds' part / sentence part, test size / PILOT_SIZE)


def mixed_part(pool, noise, sweeps, seed, quick=False):
    """Families where the α passes on to true nulls (issue 38, item 6): rows sharing one baseline,
    some at a multiple of the planned Δ = E, the others at Δ = 0 (``MIXED_FAMILIES``), run by the
    design's defaults as a sweep runs it (``simulate.sequential``, a look after every seed), in two
    of the adaptive part's worlds. The family-wise error is the share of sweeps in which any true
    null row is called better or worse; beside it the true rows' power and seeds."""
    from posenc.stats.sequential import Design
    from posenc.stats.simulate import sequential

    design = Design()
    sentence_n = world_parts(pool, noise, PILOT_SIZE, seed, sweeps=100)[0]
    rows = []
    for i, (ratio, factor) in enumerate(MIXED_WORLDS[:1] if quick else MIXED_WORLDS):
        size, effect, _, _, seed_sd = adaptive_world(pool, noise, ratio, factor, seed, sentence_n)
        for j, multiples in enumerate(MIXED_FAMILIES[:2] if quick else MIXED_FAMILIES):
            run = sequential(pool, Setting(0, size, seed_sd, tuple(m * effect for m in multiples), noise), design,
                             effect, len(multiples), sweeps, seed=seed + 100 * i + j, batch_seeds=1)
            null, true = np.array(multiples) == 0, np.array(multiples) > 0
            fwer = float(np.mean((run["verdict"][:, null] != 0).any(1)))
            cells = [f"{ratio:g}", str(size), f"{effect:.2f}", " ".join(f"{m}E" if m else "0" for m in multiples),
                     str(sweeps), f"{fwer:.4f}", f"{3 * math.sqrt(0.05 * 0.95 / sweeps):.4f}",
                     f"{np.mean(run['verdict'][:, true] == 1):.3f}", f"{run['seeds'][:, true].mean():.2f}",
                     f"{run['seeds'][:, null].mean():.2f}"]
            rows.append(cells)
            print(" | ".join(cells), flush=True)
    header = ["seeds' part / sentence part", "sentences", "planned Δ = E", "the family's rows (true Δ)", "sweeps",
              "family-wise error: a true null called better or worse", "3 sd of a rate of 0.05",
              "power of the true rows", "seeds per true row", "seeds per null row"]
    return table(header, rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("references", type=Path, help="one reference sentence a line, plain or .gz")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown tables here (default: print)")
    parser.add_argument("--pool", type=int, default=3003, help="distinct sentences read (default 3003)")
    parser.add_argument("--noise", choices=list(NOISE), default="partly shared")
    parser.add_argument("--null", type=int, default=5000, help="comparisons per null setting (default 5000)")
    parser.add_argument("--star", type=int, default=100, help="of those, with today's * (slow; default 100)")
    parser.add_argument("--alt", type=int, default=2000, help="comparisons per power setting (default 2000)")
    parser.add_argument("--pilots", type=int, default=2000, help="pilots per planning setting (default 2000)")
    parser.add_argument("--adaptive", type=int, default=600,
                        help="sweeps per Δ and world of the adaptive part (default 600)")
    parser.add_argument("--interim", choices=("booking", "plug-in", "pilot", "grow"), default="booking",
                        help="the adaptive part's plan after the pilot (simulate.adaptive; default booking)")
    parser.add_argument("--min-seeds", type=int, default=7,
                        help="the adaptive part's min_seeds (SeedsRule; default 7, as the sweeper's; 3: no floor)")
    parser.add_argument("--quick", action="store_true",
                        help="the adaptive and sequential parts' first world only (a test)")
    parser.add_argument("--holm", type=int, default=8000,
                        help="null tables per world of the holm part at 3 seeds (default 8000)")
    parser.add_argument("--holm-ratios", default=",".join(f"{r:g}" for r in RATIOS),
                        help="the holm part's worlds, seeds' part / sentence part (default 0,1,4; to split it)")
    parser.add_argument("--holm-alt", type=int, default=2000,
                        help="tables per world and seed count of the holm-power part (default 2000)")
    parser.add_argument("--held-out", type=int, default=2000,
                        help="pilots per world of the booking part (default 2000)")
    parser.add_argument("--sequential-null", type=int, default=5000,
                        help="the sequential part's null sweeps per world and family (default 5000)")
    parser.add_argument("--sequential-alt", type=int, default=2000,
                        help="its sweeps at E and 2E per world and family; half at 5E and 20E (default 2000)")
    parser.add_argument("--sequential-batch", type=int, default=1,
                        help="seeds a row gets between two looks in the sequential part (default 1, the sweeper's)")
    parser.add_argument("--sequential-gamma", type=float, default=None,
                        help="the sequential part's Hwang-Shih-DeCani γ (default: Design()'s)")
    parser.add_argument("--depth", type=int, default=400_000,
                        help="sweeps per cell of the depth part (default 400,000)")
    parser.add_argument("--stagewise", type=int, default=20_000,
                        help="sweeps per cell of the stagewise part (default 20,000)")
    parser.add_argument("--secondary", type=int, default=200_000,
                        help="sweeps per cell of the secondary part (default 200,000)")
    parser.add_argument("--coverage", type=int, default=8000,
                        help="sweeps per B's Δ of the coverage part (default 8,000)")
    parser.add_argument("--estimates", type=int, default=2000,
                        help="sweeps per truth of the estimates part (default 2,000)")
    parser.add_argument("--mixed", type=int, default=5000,
                        help="sweeps per family of the mixed part (default 5000)")
    parser.add_argument("--today", type=int, default=2000,
                        help="its sweeps per Δ of today's rule, one row (default 2000)")
    parser.add_argument("--only", default="null,effects,planning",
                        help="parts to run, of null, effects, planning, adaptive, holm, holm-power, booking, "
                             "sequential, mixed, depth, secondary, stagewise, coverage, estimates (default the "
                             "first three)")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                        help="the null part's seed counts (default 3,5,10; to split the study over processes)")
    args = parser.parse_args()
    started = time.perf_counter()
    refs = read_references(args.references, args.pool)
    parts = set(args.only.split(","))
    adaptive_size = PILOT_SIZE * (1 if args.quick else max(ADAPTIVE_FACTORS))
    sizes = {"adaptive": adaptive_size, "sequential": adaptive_size, "mixed": adaptive_size, "depth": 0,
             "secondary": 0, "stagewise": 0, "coverage": 0, "estimates": 0,
             "holm": max(HOLM_SIZES[3]),
             "holm-power": max(HOLM_POWER_SIZES), "booking": PILOT_SIZE * HELD_OUT_FACTOR}
    needed = max(sizes.get(part, max(SIZES)) for part in parts)
    if len(refs) < needed:
        sys.exit(f"calibrate_significance: {args.references} has {len(refs)} sentences; {needed} are needed")
    pool = Pool.build(refs, RATES, draws=3, seed=0)
    built = time.perf_counter() - started
    lines = []
    if "null" in parts:
        lines += [f"## False-positive rate under the null (α = 0.05), {args.noise} errors", "",
                  *null_part(pool, args.noise, args.null, args.star, 1000,
                             tuple(int(n) for n in args.seeds.split(","))), ""]
    if "effects" in parts:
        lines += [f"## Power under true effects, seed sd 1 BLEU, {args.noise} errors", "",
                  *effects_part(pool, args.noise, args.alt, 1.0, 5000), ""]
    if "planning" in parts:
        plans, truth = planning_part(pool, args.noise, args.pilots, 9000)
        lines += [f"## The planner as users use it, {args.noise} errors", "",
                  "The world where the seeds' part equals the sentence part (variance of d_s at Δ, BLEU²), by "
                  "test size: " + "; ".join(f"{PILOT_SIZE * f}: Δ {e:.2f}, spread {sp:.3f}, shared {h:.3f}"
                                            for f, (e, sp, h) in truth.items()),
                  "", *plans, ""]
    if "adaptive" in parts:
        lines += [f"## The seeds strategy, adaptive stop included, {args.noise} errors, interim: {args.interim}, "
                  f"min_seeds {args.min_seeds}", "",
                  *adaptive_part(pool, args.noise, args.adaptive, 12000, args.quick, args.interim, args.min_seeds), ""]
    if "holm" in parts:
        lines += [f"## The verdict's tail at Holm's thresholds, {args.noise} errors", "",
                  *holm_part(pool, args.noise, args.holm, 14000,
                             tuple(float(r) for r in args.holm_ratios.split(","))), ""]
    if "holm-power" in parts:
        lines += [f"## The power the tail's mend costs, {args.noise} errors", "",
                  *holm_power_part(pool, args.noise, args.holm_alt, 15000), ""]
    if "booking" in parts:
        lines += [f"## The booking of pilots whose seeds agree, {args.noise} errors", "",
                  *booking_part(pool, args.noise, args.held_out, 16000), ""]
    if "depth" in parts:
        lines += ["## The verdict's t at every depth (issue 38), normal seeds and one shared draw", "",
                  *depth_part(args.depth, 18000), ""]
    if "stagewise" in parts:
        lines += ["## The stage-wise p with a shared part (issue 49), normal seeds and one shared draw", "",
                  *stagewise_part(args.stagewise, 20000), ""]
    if "secondary" in parts:
        lines += ["## Secondary metrics of a sequential row (issue 49), normal seeds", "",
                  *secondary_part(args.secondary, 19000), ""]
    if "coverage" in parts:
        lines += ["## The repeated CI's coverage under graphical Holm (issue 60), normal seeds, shared baseline", "",
                  *coverage_part(args.coverage, 21000), ""]
    if "estimates" in parts:
        lines += ["## The median-unbiased Δ at every stop (issue 60), normal seeds", "",
                  *estimates_part(args.estimates, 22000), ""]
    if "mixed" in parts:
        lines += [f"## Families of true nulls and true effects (issue 38), {args.noise} errors", "",
                  *mixed_part(pool, args.noise, args.mixed, 17000, args.quick), ""]
    if "sequential" in parts:
        gamma = f", γ = {args.sequential_gamma:g}" if args.sequential_gamma is not None else ""
        lines += [f"## The group sequential design (issue 30){gamma}, {args.noise} errors", "",
                  *sequential_part(pool, args.noise, args.sequential_null, args.sequential_alt, args.today, 15000,
                                   args.quick, batch_seeds=args.sequential_batch, gamma=args.sequential_gamma), ""]
    wall = time.perf_counter() - started
    head = ["- Command: `OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python scripts/calibrate_significance.py "
            + " ".join(sys.argv[1:]) + "`",
            f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; wall time "
            f"{wall / 60:.1f} min (the pool of {len(RATES)} rates x 3 corruptions of {len(refs)} sentences scored "
            f"by sacreBLEU in {built:.0f} s).", ""]
    text = "\n".join(head + lines)
    if args.out:
        write_text_atomic(args.out, text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
