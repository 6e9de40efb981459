#!/usr/bin/env python
"""Harness overhead: one budget=cpu synthetic cell through ``posenc-run`` against the same fairseq
command lines run bare, with only ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` added to the environment
(what fairseq needs to load its own checkpoints), the corpus already binarized for both.

Each round runs posenc-run, the bare commands, and the bare commands again (the A/A control: how
far two identical runs differ on this machine right now), in an order that rotates from round to
round, so that machine noise hits all of them alike. With ``--before DIR`` (a checkout of older
code, e.g. ``git worktree add /tmp/before main``) each round also runs that code's posenc-run
(``PYTHONPATH=DIR``) on the same cell. Prints each wall time with the load average before and
after it, and each run's fixed cost: its wall time less fairseq's own training and decoding time
(``done training in X seconds`` in train.log, ``Translated ... in Xs`` in each generate log), i.e.
process starts, imports, loading the task and the checkpoint, and the harness's own work. Then
the ratios of the medians: posenc-run against by hand (target <= 0.85, issue 47: the trainer
decodes in its own process, where by hand starts fairseq-generate), the fixed cost against the
older code's (target <= 0.5), and the A/A ratio. budget=cpu stops after a fixed number of
epochs, so every run does exactly the same work.

With ``--cells N`` each side runs N copies of the cell (the same cell under N ``experiment_name``
labels), posenc-run as one sweep (``-m``, the basic launcher: one harness process, whose warm trainer
forks every cell after its first; ``runtime.warm_trainer``), by hand as N times the commands; the
fixed cost is then given per cell (the sweep's wall time less fairseq's own time, over N). The side
``posenc-run (cold)`` is this code with ``runtime.warm_trainer=false``: what the warm trainer saves.

    .venv/bin/python scripts/bench_harness.py [--rounds 3] [--max-update N (a shorter cell)] [--before DIR]
        [--cells N]

Run it on a quiet machine (load average well under the number of cores): the figures are only
as good as the load column says.
"""

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET = 0.85         # posenc-run / by hand (issue 47)
FIXED_TARGET = 0.5    # fixed cost: this code / the older code
_TRAINED = re.compile(r"done training in ([0-9.]+) seconds")
_DECODED = re.compile(r"Translated [0-9,]+ sentences \([0-9,]+ tokens\) in ([0-9.]+)s")
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


def fairseq_own(cell: Path) -> float:
    """fairseq's own training and decoding seconds in a cell's logs (its loops, nothing around them)."""
    own = 0.0
    for log in [cell / "train.log", *sorted(cell.glob("generate-*.log"))]:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        own += sum(float(m.group(1)) for m in _TRAINED.finditer(text)) + \
            sum(float(m.group(1)) for m in _DECODED.finditer(text))
    return own


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
    parser.add_argument("--before", help="a checkout of older code: its posenc-run runs too (PYTHONPATH=DIR)")
    parser.add_argument("--cells", type=int, default=1, help="cells per run: posenc-run runs them as one sweep")
    args = parser.parse_args()
    if args.cells < 1:
        sys.exit(f"bench_harness: --cells {args.cells} is not allowed; allowed: a whole number >= 1")
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

    n = args.cells
    sides = {"posenc-run": harness_side(work, overrides, env, n)}
    if n > 1:
        sides["posenc-run (cold)"] = harness_side(work, [*overrides, "runtime.warm_trainer=false"], env, n, "cold")
    if args.before:
        sides["posenc-run (before)"] = harness_side(work, overrides, dict(env, PYTHONPATH=args.before), n, "before")
    sides["by hand"] = by_hand_side(work, commands, n, "hand")
    sides["by hand (A/A)"] = by_hand_side(work, commands, n, "control")
    print(f"{n} cell(s) per run; fixed cost per cell", flush=True)
    times, fixed = run_rounds(sides, args.rounds, n)
    report(times, fixed)
    shutil.rmtree(work, ignore_errors=True)


def harness_side(work: Path, overrides: list, env: dict, cells: int, name: str = "harness"):
    """posenc-run on the cell (``cells`` > 1: one sweep of that many copies); returns its cell directories."""
    def run(i):
        where = work / f"{name}{i}"
        if cells == 1:
            return (*timed([str(BIN / "posenc-run"), *overrides, f"hydra.run.dir={where}"], work, env), [where])
        labels = ",".join(f"copy{k}" for k in range(cells))
        seconds, before, after = timed([str(BIN / "posenc-run"), "-m", *overrides, f"experiment_name={labels}",
                                        f"hydra.sweep.dir={where}"], work, env)
        return seconds, before, after, sorted(p.parent for p in where.glob("*/train.log"))
    return run


def by_hand_side(work: Path, commands: list, cells: int, name: str):
    """The bare commands, ``cells`` times, each copy in a directory of its own."""
    def run(i):
        dirs, total, before = [], 0.0, load()
        for k in range(cells):
            cell = work / f"{name}{i}" / f"copy{k}"
            cell.mkdir(parents=True)
            seconds, _, _ = run_bare([([w.replace("{cell}", str(cell)) for w in argv], t) for argv, t in commands],
                                     cell)
            total += seconds
            dirs.append(cell)
        return total, before, load(), dirs
    return run


def run_rounds(sides: dict, rounds: int, cells: int = 1):
    """Each side once a round, in an order that rotates; wall seconds by side, and fixed seconds per cell."""
    times, fixed = {name: [] for name in sides}, {name: [] for name in sides}
    for i in range(rounds):
        names = list(sides)
        names = names[i % len(names):] + names[:i % len(names)]
        parts = []
        for name in names:
            seconds, before, after, dirs = sides[name](i)
            if len(dirs) != cells:
                sys.exit(f"bench_harness: {name} left {len(dirs)} cell directories, not {cells}")
            times[name].append(seconds)
            fixed[name].append((seconds - sum(fairseq_own(cell) for cell in dirs)) / cells)
            parts.append(f"{name} {seconds:.1f}s, fixed {fixed[name][-1]:.1f}s (load {before:.2f} -> {after:.2f})")
        print(f"round {i + 1}: " + ", ".join(parts), flush=True)
    return times, fixed


def report(times: dict, fixed: dict) -> None:
    med = {name: statistics.median(values) for name, values in times.items()}
    cost = {name: statistics.median(values) for name, values in fixed.items()}
    ratio = med["posenc-run"] / med["by hand"]
    control = med["by hand (A/A)"] / med["by hand"]
    print(f"median posenc-run {med['posenc-run']:.1f}s / by hand {med['by hand']:.1f}s = {ratio:.3f} "
          f"(target <= {TARGET}: {'PASS' if ratio <= TARGET else 'FAIL'}); "
          f"A/A control {med['by hand (A/A)']:.1f}s / {med['by hand']:.1f}s = {control:.3f}")
    print("median fixed cost (wall less fairseq's own training and decoding): "
          + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in cost.items()))
    if "posenc-run (before)" in med:
        before = med["posenc-run (before)"] / med["by hand"]
        shrink = cost["posenc-run"] / cost["posenc-run (before)"]
        print(f"before: posenc-run {med['posenc-run (before)']:.1f}s / by hand = {before:.3f}; fixed cost now / "
              f"before = {cost['posenc-run']:.1f}s / {cost['posenc-run (before)']:.1f}s = {shrink:.3f} "
              f"(target <= {FIXED_TARGET}: {'PASS' if shrink <= FIXED_TARGET else 'FAIL'})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({len(os.sched_getaffinity(0))} cores; a quiet machine stays well below that)")


if __name__ == "__main__":
    main()
