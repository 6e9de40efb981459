#!/usr/bin/env python
"""posenc-table speed: wall time of the command as a user types it, on synthesized sweeps.

  1. 1,000 cells of records alone (no hypotheses files, no plan): 4 placements x 10 seeds x 25
     corpora names. Target: under 3 s.
  2. The same 1,000 cells with Hydra's multirun.yaml plan (Hydra writes one for every sweep).
  3. The 12-cell main job (4 placements x 3 seeds) with its plan and hypothesis files of the
     synthetic test sets' size (500 test + 500 test_long sentences, BLEU near 90 as measured),
     with significance (sacreBLEU's paired bootstrap, 1000 resamples, and the verdict over seeds),
     chrF++, buckets and the long split. Target: under 10 s. First with no sentence statistics
     cached (a sweep scored before the cells cached them), then again (cached, as the sweep's end
     finds them: each cell caches its outputs' BLEU and chrF++ statistics as it scores them; and
     as posenc-table and a rerun of the sweep find them); with --power (what the sweep's end
     renders; target: it adds under 2 s); with --plots; with --test ar (10,000 trials).

Each command runs --rounds times, alternating, in one session; the medians are printed with
their ratio to the target and to the bare start-up (``posenc-table --help``).

    .venv/bin/python scripts/bench_table.py [--rounds 5] [--keep DIR]
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from posenc.report.outputs import STATS_CACHE  # noqa: E402
from report_fixtures import degrade, synthetic_test_sets, write_cell, write_plan, write_testset  # noqa: E402

BIN = Path(sys.executable).parent
PLACEMENTS = ("both", "source", "target", "none")
MAIN_RATES = {"both": 0.035, "source": 0.035, "target": 0.03, "none": 0.033}  # BLEU ~89-91, as make table4


def records_only(sweep: Path, with_plan: bool) -> None:
    datas = [f"corpus{i:02d}" for i in range(25)]
    for data in datas:
        for placement in PLACEMENTS:
            for seed in range(1, 11):
                job = sweep / f"data={data},placement={placement},seed={seed}"
                job.mkdir(parents=True)
                record = {"experiment": "bench", "model": "fconv_small", "data": data, "pe": "learned",
                          "placement": placement, "encoder_pos": "learned", "decoder_pos": "learned", "seed": seed,
                          "status": "failed" if (seed, data[-1]) == (10, "3") else "ok", "error": "",
                          "bleu": 80 + seed / 10 + PLACEMENTS.index(placement) / 4,
                          "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
                          "tok_bleu": 80 + seed / 10, "valid_ppl": 1.5, "test_sentences": 500, "num_updates": 218,
                          "train_wall_s": 45.0, "hypotheses": "hypotheses.txt", "job_dir": str(job),
                          "corpus": {"name": data, "cache_key": hashlib.sha256(data.encode()).hexdigest()}}
                (job / "result.json").write_text(json.dumps(record))
    if with_plan:
        write_plan(sweep, {"data": ",".join(datas), "placement": ",".join(PLACEMENTS),
                           "seed": ",".join(map(str, range(1, 11)))}, ["experiment=bench"])


def main_job(sweep: Path, cache: Path) -> None:
    splits = synthetic_test_sets(test=500, test_long=500)
    corpus = write_testset(cache, splits)
    for placement, rate in MAIN_RATES.items():
        for seed in (1, 2, 3):
            offset = seed * 101 + 1000 * PLACEMENTS.index(placement)
            hyps = {s: degrade(refs, rate * (6 if s == "test_long" else 1), seed=offset + i * 7)
                    for i, (s, (_, refs)) in enumerate(splits.items())}
            write_cell(sweep, f"placement={placement},seed={seed}", corpus, splits, hyps, placement=placement,
                       seed=seed)
    write_plan(sweep, {"placement": ",".join(PLACEMENTS), "seed": "1,2,3"}, ["experiment=table4"])


def drop_stats_cache(sweep: Path) -> None:
    for cache in sweep.glob(f"*/{STATS_CACHE}"):
        shutil.rmtree(cache)


def timed(argv, before=None) -> float:
    if before:
        before()
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"bench_table: {' '.join(map(str, argv))} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", help="build the sweeps here and keep them (default: a temp dir, removed)")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="posenc-bench-table-"))
    try:
        started = time.perf_counter()
        records_only(work / "records", with_plan=False)
        records_only(work / "records_plan", with_plan=True)
        main_job(work / "main", work / "cache")
        print(f"synthesized the sweeps in {time.perf_counter() - started:.1f} s under {work}")
        print("load average before: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        table = str(BIN / "posenc-table")
        cold = lambda: drop_stats_cache(work / "main")  # noqa: E731 -- as at the sweep's end: nothing cached
        cases = {
            "start-up (posenc-table --help)": ([table, "--help"], None, None),
            "1,000 cells, records alone": ([table, work / "records"], 3.0, None),
            "1,000 cells, records + multirun.yaml": ([table, work / "records_plan"], None, None),
            "main job, 12 cells: verdicts + chrF++ + buckets + long split, nothing cached": (
                [table, work / "main"], None, cold),
            "main job, 12 cells: the same, statistics cached (the sweep's end)": ([table, work / "main"], 10.0, None),
            "main job, 12 cells, cached, + --power (the sweep's end renders it so)": (
                [table, work / "main", "--power"], 10.0, None),
            "main job, 12 cells, cached, + --power --test-size 3003": (
                [table, work / "main", "--power", "--test-size", "3003"], None, None),
            "main job, 12 cells, + --plots": ([table, work / "main", "--plots", work / "plots"], None, None),
            "main job, 12 cells, --test ar (10,000 trials)": ([table, work / "main", "--test", "ar"], None, None),
        }
        os.environ["POSENC_CACHE"] = str(work / "cache")  # where the main job's records find their test set
        times = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (argv, _, before) in cases.items():
                times[name].append(timed(argv, before))
        print("load average after: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        startup = statistics.median(times["start-up (posenc-table --help)"])
        print(f"\n{'case':64s} {'median s':>9s} {'min s':>7s} {'x start-up':>10s} {'/ target':>9s}")
        for name, (_, target, _) in cases.items():
            med = statistics.median(times[name])
            verdict = f"{med / target:.2f} {'PASS' if med < target else 'FAIL'}" if target else ""
            print(f"{name:64s} {med:9.2f} {min(times[name]):7.2f} {med / startup:10.2f} {verdict:>9s}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
