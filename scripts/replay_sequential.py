#!/usr/bin/env python
"""Replay a sequential seeds sweep's recorded looks under another design setting (its HSD γ, or the
statistic its thresholds are simulated for), to see which decisions a change of the design's
defaults would have changed, without training again.

Each row's looks, as ``seeds_strategy.json`` recorded them, are fed in order through
``sequential.decide`` with the decisions taken so far frozen, as the sweeper feeds them. A row that
the new setting leaves open after its last recorded look would have gone on to seeds that were
never trained: the replay says so and cannot say more. One family (the rows sharing the sweep's
baseline), as the seeds strategy runs it.

    .venv/bin/python scripts/replay_sequential.py SWEEP_DIR [--gamma G] [--statistic verdict|seeds]
"""

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posenc.cells.strategy import SeedsState, StateError, read_state  # noqa: E402
from posenc.stats.sequential import STATISTICS, Design, decide  # noqa: E402


def replay(state: SeedsState, design: Design) -> list:
    """[(row, Decision or None)] in the order the decisions fall; None: open after its looks."""
    effect = float(state.settings.effect)
    rows = {r.row: r.looks for r in state.sequential_rows() if not r.baseline and r.looks}
    frozen, order = {}, []
    for n in sorted({look.n for looks in rows.values() for look in looks}):
        seen = {name: [x for x in looks if x.n <= n] for name, looks in rows.items() if name not in frozen}
        seen = {name: looks for name, looks in seen.items() if looks and looks[-1].n == n}
        if not seen:
            continue
        for name, decision in decide(design, effect, seen, frozen).items():
            if decision.stopped and name not in frozen:
                frozen[name] = decision
                order.append((name, decision))
    return order + [(name, None) for name in rows if name not in frozen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="a sweep directory of hydra/sweeper=posenc_seeds")
    parser.add_argument("--gamma", type=float, default=None, help="HSD's γ to replay with (default Design()'s)")
    parser.add_argument("--statistic", choices=STATISTICS, default=Design.statistic,
                        help="the thresholds' statistic to replay with (default Design()'s: the verdict's t; seeds: "
                             "the seeds-only table of sweeps started before 2026-12-03)")
    args = parser.parse_args()
    try:
        state = read_state(args.sweep)
    except StateError as err:
        sys.exit(f"replay_sequential: {err}")
    if not isinstance(state, SeedsState) or not state.sequential_rows():
        sys.exit(f"replay_sequential: {args.sweep} holds no group sequential seeds state (seeds_strategy.json "
                 "written by the sequential design)")
    ran_design = state.settings.design
    design = replace(ran_design, gamma=Design.gamma if args.gamma is None else args.gamma, statistic=args.statistic)
    if design.problem():
        sys.exit(f"replay_sequential: {design.problem()}")
    ran = {r.row: r.why for r in state.sequential_rows() if not r.baseline}
    print(f"{args.sweep}: ran at γ = {ran_design.gamma:g} for the {ran_design.statistic} t, replayed at "
          f"γ = {design.gamma:g} for the {design.statistic} t")
    for name, decision in replay(state, design):
        now = decision.why if decision else "open after its last recorded look: would have gone on"
        print(f"  {name}: {ran[name]}  ->  {now}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
