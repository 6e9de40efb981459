#!/usr/bin/env python
"""Harness overhead: one budget=cpu synthetic cell through ``posenc-run`` over the same fairseq
commands run by hand (its ``commands.sh``), the corpus already binarized for both.

Runs alternate (harness, by hand, harness, by hand, ...) in one session so that machine noise
hits both alike; prints each wall time and the ratio of the medians. Target: ratio <= 1.10.
budget=cpu stops after a fixed number of epochs, so both sides do exactly the same work.

    .venv/bin/python scripts/bench_harness.py [--rounds 3] [--max-update N (a shorter cell)]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET = 1.10


def timed(argv, cwd, env):
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_harness: {argv[0]} failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-update", type=int, default=0, help="cap training at N updates (0: budget=cpu as is)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="posenc-bench-"))
    env = dict(os.environ, POSENC_CACHE=os.environ.get("POSENC_CACHE", str(Path.cwd() / ".posenc_cache")))
    # No time cap: a cap that binds on one side and not the other would compare different work.
    overrides = ["budget.max_time_min=0", "progress=false"]
    if args.max_update:
        overrides += [f"budget.max_update={args.max_update}", "budget.max_epoch=0"]
    # Warm-up: binarize the corpus (cached) and produce the cell's commands.sh.
    first = work / "warmup"
    timed([str(BIN / "posenc-run"), *overrides, f"hydra.run.dir={first}"], work, env)
    commands = (first / "commands.sh").read_text()
    harness_s, by_hand_s = [], []
    for i in range(args.rounds):
        cell = work / f"harness{i}"
        harness_s.append(timed([str(BIN / "posenc-run"), *overrides, f"hydra.run.dir={cell}"], work, env))
        hand = work / f"hand{i}"
        hand.mkdir()
        (hand / "commands.sh").write_text(commands.replace(str(first), str(hand)))
        by_hand_s.append(timed(["bash", str(hand / "commands.sh")], hand, env))
        print(f"round {i + 1}: posenc-run {harness_s[-1]:.1f}s, fairseq by hand {by_hand_s[-1]:.1f}s", flush=True)
    ratio = statistics.median(harness_s) / statistics.median(by_hand_s)
    print(f"median posenc-run {statistics.median(harness_s):.1f}s / by hand {statistics.median(by_hand_s):.1f}s "
          f"= {ratio:.3f} (target <= {TARGET}: {'PASS' if ratio <= TARGET else 'FAIL'})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
