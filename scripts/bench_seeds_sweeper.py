#!/usr/bin/env python
"""The seeds strategy's own work between two batches, beside the cells it waits for.

Between batches ``hydra/sweep=posenc_seeds`` reads the sweep, builds its report with the power
section (each row's plan) and writes its state. This times exactly that (``SeedsSweeper.next_batch``
and ``write_state``) on a sweep of real cells, ``--rounds`` times in one session, and prints the
median beside the mean wall time of one of the sweep's cells (their records' ``cell_wall_s``).
Target: under 2 s beyond the cells.

    .venv/bin/python scripts/bench_seeds_sweeper.py SWEEP_DIR [--rounds 5] [--baseline placement=both]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.cells.plan import PLAN_FILE
from posenc.cells.record import is_ok
from posenc.cells.sweep import read_sweep
from posenc.harness.sweep.seeds import SeedsSweeper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="placement=both")
    parser.add_argument("--max-seeds", type=int, default=10)
    args = parser.parse_args()
    plan = OmegaConf.load(args.sweep_dir / PLAN_FILE)
    naming = plan.hydra.job.config.override_dirname
    params = OmegaConf.to_container(plan.hydra.sweeper.get("params") or {})
    sweeper = SeedsSweeper(params=params, baseline=args.baseline, max_seeds=args.max_seeds)
    settings = sweeper.settings()
    rows = sweeper.rows([o for o in plan.hydra.overrides.task if not o.startswith("hydra")], settings)
    overrides = OverridesParser.create()
    out = args.sweep_dir / "bench-state"
    out.mkdir(exist_ok=True)
    times = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        sweeper.next_batch(rows, args.sweep_dir, settings, naming, overrides)
        sweeper.write_state(out, rows, naming, overrides)
        times.append(time.perf_counter() - started)
    cells = [c.record["cell_wall_s"] for c in read_sweep(args.sweep_dir).cells
             if is_ok(c.record) and c.record.get("cell_wall_s")]
    between = statistics.median(times)
    print(f"{args.sweep_dir}: {len(cells)} cells, {len(rows)} rows; between two batches: median {between:.2f} s "
          f"over {args.rounds} rounds (first {times[0]:.2f} s; target 2 s: {between / 2:.2f} of it); "
          f"one cell: mean {statistics.fmean(cells):.1f} s ({between / statistics.fmean(cells):.3f} of it)")
    (out / "seeds_strategy.json").unlink(missing_ok=True)
    out.rmdir()


if __name__ == "__main__":
    sys.exit(main())
