#!/usr/bin/env python
"""Harness overhead: one budget=cpu synthetic cell through ``posenc-run`` against the same fairseq
command lines run bare, with only ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` added to the environment
(what fairseq needs to load its own checkpoints), the corpus already binarized for both.

Each round runs posenc-run, the bare commands, and the bare commands again (the A/A control: how
far two identical runs differ on this machine right now), in an order that rotates from round to
round, so that machine noise hits all three alike. Prints each wall time with the load average
before and after it, the ratio of the medians (target <= 1.05 on a quiet machine) and the A/A
ratio. budget=cpu stops after a fixed number of epochs, so every run does exactly the same work.

    .venv/bin/python scripts/bench_harness.py [--rounds 3] [--max-update N (a shorter cell)]

Run it on a quiet machine (load average well under the number of cores): the figures are only
as good as the load column says.
"""

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET = 1.05
BY_HAND_ENV = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
SHOWN_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "PYTHONUNBUFFERED", "PYTHONWARNINGS")


def load() -> float:
    return os.getloadavg()[0]


def timed(argv, cwd, env, stdout=subprocess.DEVNULL):
    before = load()
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_harness: {argv[0]} failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - started, before, load()


def bare_commands(commands_sh: Path):
    """The fairseq command lines of a cell's commands.sh, each as (argv, stdout file or None):
    its exports, ``cd`` and ``set`` lines are left out (the point is to run fairseq bare)."""
    out = []
    for line in commands_sh.read_text().splitlines():
        if not line or line.startswith(("#", "set ", "cd ", "export ")):
            continue
        words = shlex.split(line)
        target = None
        if ">" in words:
            target = words[words.index(">") + 1]
            words = words[:words.index(">")]
        out.append((words, target))
    return out


def run_bare(commands, cwd: Path):
    """Run the bare command lines one after another; wall seconds and the loads around them."""
    env = dict(os.environ, **BY_HAND_ENV)
    before, total = load(), 0.0
    for argv, target in commands:
        with open(cwd / (target or "train.log"), "w") as handle:
            seconds, _, _ = timed(argv, cwd, env, stdout=handle)
        total += seconds
    return total, before, load()


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
    print(f"machine: {len(os.sched_getaffinity(0))} cores; environment: "
          + ", ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in SHOWN_ENV), flush=True)
    print(f"load average before the warm-up: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    # Warm-up: binarize the corpus (cached) and produce the cell's commands.sh.
    first = work / "warmup"
    timed([str(BIN / "posenc-run"), *overrides, f"hydra.run.dir={first}"], work, env)
    commands = [([w.replace(str(first), "{cell}") for w in argv], target)
                for argv, target in bare_commands(first / "commands.sh")]

    def harness(i):
        return timed([str(BIN / "posenc-run"), *overrides, f"hydra.run.dir={work / f'harness{i}'}"], work, env)

    def by_hand(name):
        def run(i):
            cell = work / f"{name}{i}"
            cell.mkdir()
            return run_bare([([w.replace("{cell}", str(cell)) for w in argv], t) for argv, t in commands], cell)
        return run

    sides = {"posenc-run": harness, "by hand": by_hand("hand"), "by hand (A/A)": by_hand("control")}
    times = {name: [] for name in sides}
    for i in range(args.rounds):
        names = list(sides)
        names = names[i % 3:] + names[:i % 3]
        parts = []
        for name in names:
            seconds, before, after = sides[name](i)
            times[name].append(seconds)
            parts.append(f"{name} {seconds:.1f}s (load {before:.2f} -> {after:.2f})")
        print(f"round {i + 1}: " + ", ".join(parts), flush=True)
    med = {name: statistics.median(values) for name, values in times.items()}
    ratio = med["posenc-run"] / med["by hand"]
    control = med["by hand (A/A)"] / med["by hand"]
    print(f"median posenc-run {med['posenc-run']:.1f}s / by hand {med['by hand']:.1f}s = {ratio:.3f} "
          f"(target <= {TARGET}: {'PASS' if ratio <= TARGET else 'FAIL'}); "
          f"A/A control {med['by hand (A/A)']:.1f}s / {med['by hand']:.1f}s = {control:.3f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({len(os.sched_getaffinity(0))} cores; a quiet machine stays well below that)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
