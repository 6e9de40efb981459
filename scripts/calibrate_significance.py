#!/usr/bin/env python
"""Calibrate the verdict by simulation on real text: false-positive rate under the null and power
under effects of 0.5, 1 and 2 BLEU, for today's star (sacreBLEU's paired bootstrap on the seeds'
outputs concatenated), the verdict (s_d²/n + shared test-set variance, t with n-1 df) and two
alternatives (s_d²/n + the whole test-set variance; the larger of the two); then the power
planning (mde_bleu, seeds_needed) checked against the simulated power at its own predictions.

Systems are the references of a real corpus corrupted word by word (posenc.report.simulate), at a
rate set per system and seed so that a system's corpus BLEU has the seed spread asked for.

    nice -n 10 .venv/bin/python scripts/calibrate_significance.py REFERENCES [--out FILE] [--quick]

REFERENCES: one reference sentence a line, plain or .gz (e.g. Multi30k's test_2016_flickr.en.gz).
"""

import argparse
import gzip
import itertools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from posenc.atomic import write_text_atomic
from posenc.report import power as power_mod
from posenc.report.simulate import NOISE, Pool, Setting, rejection_rate, simulate
from posenc.report.verdict import SeedTest

RATES = np.round(np.linspace(0.0, 0.7, 29), 4)
TESTS = (("p_star", "today's * (sacreBLEU paired bs, concatenated)"), ("p_shared", "verdict (s_d²/n + v_shared)"),
         ("p_sum", "alt.: s_d²/n + v_test"), ("p_max", "alt.: max(s_d²/n, v_test)"))


def read_references(path: Path) -> list:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle if line.strip()]


def row_for(setting, result, comparisons):
    cells = [setting.noise, str(setting.seeds), str(setting.sentences), f"{np.nanmean(result['seed_bleu_sd']):.2f}",
             f"{setting.effect:g}", f"{np.nanmean(result['delta']):+.2f}", str(comparisons)]
    return cells + [f"{rejection_rate(result[key]):.3f}" for key, _ in TESTS]


def components_of(result, setting) -> power_mod.Components:
    """The variance components averaged over a setting's simulated sweeps (a pilot with many sweeps)."""
    n = setting.seeds
    test = SeedTest(0.0, 0.0, 0.0, 0.0, 0.0, n, float(np.sqrt(np.nanmean(result["sd_diff"] ** 2))),
                    float(np.nanmean(result["var_test"])), float(np.nanmean(result["var_test_seed"])),
                    setting.sentences)
    return power_mod.Components.of(test)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("references", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown tables here (default: print)")
    parser.add_argument("--null", type=int, default=1000, help="comparisons per null setting (default 1000)")
    parser.add_argument("--alt", type=int, default=200, help="comparisons per power setting (default 200)")
    parser.add_argument("--star-null", type=int, default=200, help="of those, with today's star (slow; default 200)")
    parser.add_argument("--star-alt", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a small version (minutes): 100 / 50 comparisons")
    parser.add_argument("--only", default="null,effects", help="parts to run: null, effects (with the power "
                        "planning check, which needs them); default both")
    args = parser.parse_args()
    if args.quick:
        args.null, args.alt, args.star_null, args.star_alt = 100, 50, 50, 25
    started = time.perf_counter()
    refs = read_references(args.references)
    pool = Pool.build(refs, RATES, draws=3, seed=0)
    built = time.perf_counter() - started
    seeds, sizes, null_sds, alt_sd, effects = (3, 5, 10), (500, 3003), (0.2, 5.0), 1.0, (0.5, 1.0, 2.0)
    # 500 sentences: the first 500 of the corpus' test set; 3003 (newstest2014's size): resampled from all of them.
    small = Pool(pool.rates, pool.stats[:, :, :500], pool.curve)
    pools = {500: small if len(refs) > 500 else pool, 3003: pool}
    lines, null_results = [], {}
    header = ["noise", "seeds", "sentences", "measured seed sd", "true Δ", "mean Δ", "comparisons"] + \
             [label for _, label in TESTS]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    parts = set(args.only.split(","))
    for i, (noise, n, size, sd) in enumerate(itertools.product(NOISE, seeds, sizes, null_sds)):
        if "null" not in parts:
            break
        setting = Setting(n, size, sd, 0.0, noise)
        result = simulate(pools[size], setting, args.null, seed=1000 + i, star_comparisons=args.star_null)
        null_results[(noise, n, size, sd)] = result
        table.append("| " + " | ".join(row_for(setting, result, args.null)) + " |")
        print(table[-1], flush=True)
    if "null" in parts:
        lines += ["## False-positive rate under the null (α = 0.05)", ""] + table + [""]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    alt_results = {}
    for i, (noise, n, size, effect) in enumerate(itertools.product(NOISE, seeds, sizes, effects)):
        if "effects" not in parts:
            break
        setting = Setting(n, size, alt_sd, effect, noise)
        result = simulate(pools[size], setting, args.alt, seed=5000 + i, star_comparisons=args.star_alt)
        alt_results[(noise, n, size, effect)] = result
        table.append("| " + " | ".join(row_for(setting, result, args.alt)) + " |")
        print(table[-1], flush=True)
    if "effects" in parts:
        lines += [f"## Power (rejection rate) under true effects, seed sd {alt_sd:g} BLEU", ""] + table + [""]
    # Power planning against the simulation: components from a 10-seed pilot at seed sd 1 (the
    # null runs at this sd are not there; the effect-0.5 runs are: Δ does not change the variances).
    table = ["| noise | sentences | predicted | at | simulated power | comparisons |", "|---|---|---|---|---|---|"]
    checks = 300 if not args.quick else 60
    for j, (noise, size) in enumerate(itertools.product(NOISE, sizes)):
        if "effects" not in parts:
            break
        pilot = alt_results[(noise, 10, size, 0.5)]
        comps = components_of(pilot, Setting(10, size, alt_sd, 0.5, noise))
        mde3 = power_mod.mde(3, comps)
        result = simulate(pools[size], Setting(3, size, alt_sd, mde3, noise), checks, seed=9000 + j, star_comparisons=0)
        table.append(f"| {noise} | {size} | mde_bleu = {mde3:.2f} BLEU | 3 seeds, Δ = {mde3:.2f} | "
                     f"{rejection_rate(result['p_shared']):.3f} | {checks} |")
        print(table[-1], flush=True)
        effect = 1.0
        needed = power_mod.seeds_needed(effect, comps)
        if needed is None or needed > 40:
            table.append(f"| {noise} | {size} | seeds_needed({effect:g}) = {needed} | (not simulated) | - | - |")
            continue
        result = simulate(pools[size], Setting(needed, size, alt_sd, effect, noise), checks, seed=9500 + j,
                          star_comparisons=0)
        table.append(f"| {noise} | {size} | seeds_needed({effect:g} BLEU) = {needed} | {needed} seeds, "
                     f"Δ = {effect:g} | {rejection_rate(result['p_shared']):.3f} | {checks} |")
        print(table[-1], flush=True)
    if "effects" in parts:
        lines += ["## Power planning against the simulation (target power 0.8)", ""] + table + [""]
    wall = time.perf_counter() - started
    head = ["- Command: `OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python scripts/calibrate_significance.py "
            + " ".join(sys.argv[1:]) + "`",
            f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs), Python "
            f"{platform.python_version()}; wall time {wall / 60:.1f} min (the pool of {len(RATES)} rates x 3 "
            f"corruptions of {len(refs)} sentences scored by sacreBLEU in {built:.0f} s).",
            f"- Base BLEU 40; {args.null} comparisons per null setting, {args.alt} per effect; today's * uses 300 "
            f"resamples on the first {args.star_null} (null) / {args.star_alt} (effects) of them only (it is slow; "
            "sacreBLEU's default is 1000 resamples; the rate at α = 0.05 needs fewer).", ""]
    text = "\n".join(head + lines)
    if args.out:
        write_text_atomic(args.out, text)
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
