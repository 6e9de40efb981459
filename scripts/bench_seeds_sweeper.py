#!/usr/bin/env python
"""The seeds strategy's own work between two batches, beside the cells it waits for.

Between batches ``hydra/sweeper=posenc_seeds`` reads the sweep, builds its report (each row's
test against its baseline: the look), decides by the group sequential design and writes its
state. This times exactly that (``read_sweep``, ``SeedsPlanner.next_batch``, ``write_state``) on
a sweep of real cells, ``--rounds`` times in one session, each round a fresh planner that takes
every row's look again; the design's threshold tables are cached after the first round (as in a
sweep, whose first look computes them). It prints the first round and the median of the rest
beside the mean wall time of one of the sweep's cells (their records' ``cell_wall_s``).
Target: under 2 s beyond the cells, with the tables cached.

    .venv/bin/python scripts/bench_seeds_sweeper.py SWEEP_DIR [--rounds 5] [--baseline placement=both]

A fixed-seed sweep works too: its seeds are dropped from the grid, as the strategy would choose them.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from posenc.cells.plan import PLAN_FILE
from posenc.cells.record import is_ok
from posenc.cells.strategy import SeedsState, write_state
from posenc.cells.sweep import read_sweep
from posenc.harness.sweep.planner import SeedsPlanner, SeedsSettings
from posenc.harness.sweep.seeds import cell_namer, grid_jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="placement=both")
    parser.add_argument("--max-seeds", type=int, default=10)
    args = parser.parse_args()
    plan = OmegaConf.load(args.sweep_dir / PLAN_FILE)
    preset = plan.hydra.sweeper.get("params")
    params = OmegaConf.to_container(preset) if preset else {}
    settings = SeedsSettings.of({"baseline": args.baseline, "max_seeds": args.max_seeds})
    grid = [o for o in plan.hydra.overrides.task if not o.startswith(("hydra", "seed="))]  # a fixed sweep's seeds too
    jobs = grid_jobs(params, grid, "seeds")
    name = cell_namer(plan)
    out = args.sweep_dir / "bench-state"
    out.mkdir(exist_ok=True)
    times, rows = [], 0
    for _ in range(args.rounds + 1):
        started = time.perf_counter()
        planner = SeedsPlanner.for_grid(settings, jobs, name)
        planner.next_batch(read_sweep(args.sweep_dir))
        write_state(out, planner.state())
        times.append(time.perf_counter() - started)
        rows = len(planner.rows)
    cells = [c.record.cell_wall_s for c in read_sweep(args.sweep_dir).cells
             if is_ok(c.record) and c.record.cell_wall_s]
    between = statistics.median(times[1:])
    print(f"{args.sweep_dir}: {len(cells)} cells, {rows} rows; between two batches: median {between:.2f} s "
          f"over {args.rounds} rounds with the thresholds cached (first, computing them: {times[0]:.2f} s; "
          f"target 2 s: {between / 2:.2f} of it); "
          f"one cell: mean {statistics.fmean(cells):.1f} s ({between / statistics.fmean(cells):.3f} of it)")
    (out / SeedsState.FILE).unlink(missing_ok=True)
    out.rmdir()


if __name__ == "__main__":
    sys.exit(main())
