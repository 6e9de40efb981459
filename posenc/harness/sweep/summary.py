"""How a sweep ended, in one line, and the exit status that says the same:
``12 cells: 11 ok, 1 failed: lr=1e9,placement=both,seed=1 (loss is inf at update 3)``.

Counted from the sweep directory as every reader sees it (``posenc.cells.sweep``: the plan in
Hydra's ``multirun.yaml`` and each cell's ``result.json``), so it holds whichever launcher ran the
cells and in whichever processes.
"""

from pathlib import Path

from posenc.cells.record import FAILED, INTERRUPTED, OK, PRUNED, RUNNING, error_of, status_of, time_capped
from posenc.cells.strategy import TuneState
from posenc.cells.sweep import MISSING, Sweep, read_sweep
from posenc.report.sequential import row_stop
from posenc.report.tuning import edge_advice

# An ok cell that training's time cap stopped: counted among the ok, and named.
TIME_CAPPED = "time capped"


def _short(error: str) -> str:
    """The reason without its log path (the cell's directory has the log)."""
    return (error or "no reason recorded").split(" (log: ")[0]


def _label(values: dict, varying: set) -> str:
    shown = {k: v for k, v in values.items() if k in varying} or values
    return ",".join(f"{k}={v}" for k, v in shown.items())


def tune_summary(state, row) -> str:
    """``placement=none 8 trials (2 pruned), best optim.args.lr=0.0012``: one row of a tune strategy,
    with the flag of a chosen value at the edge of its range."""
    states = [t.state for t in row.trials]
    counts = ", ".join(f"{states.count(state)} {word}" for state, word in
                       (("PRUNED", PRUNED), ("FAIL", FAILED), ("RUNNING", "unfinished")) if state in states)
    chosen = ("best " + " ".join(f"{k}={v}" for k, v in row.best.values.items())) if row.best \
        else "no trial finished"
    edge = edge_advice(state, row)
    if edge:
        chosen += f" ({edge})"
    planned = f", {len(row.seeds)} seeds ({row_stop(row.plan)})" if row.plan is not None else ""
    return f"{row.row} {len(states)} trials" + (f" ({counts})" if counts else "") + f", {chosen}{planned}"


def strategy_summary(state) -> str:
    """``; seeds strategy: placement=none 3 seeds (efficacy at 3 seeds: worse ...)``: each row's
    seeds and stop, or each tuned row's trials and choice."""
    if isinstance(state, TuneState):
        return "; tune strategy: " + "; ".join(tune_summary(state, r) for r in state.rows)
    return "; seeds strategy: " + "; ".join(f"{r.row} {len(r.seeds)} seeds ({row_stop(r)})"
                                            for r in state.rows if not r.baseline)


def summarize(sweep, interrupted_by: int = 0):
    """``(line, exit status)`` for ``sweep`` (a ``Sweep`` as read, or its directory): 0 when every
    planned cell is ok (or skipped by design), 1 when any failed or never reported,
    ``interrupted_by`` (128 + the signal) when this run was stopped by a signal."""
    if not isinstance(sweep, Sweep):
        sweep = read_sweep(Path(sweep))
    if sweep.planned:
        cells = sweep.plan_values
    else:  # no plan: whatever reported
        cells = {c.name: {"cell": c.name} for c in sweep.every_cell()}
    skipped = {name for name, _ in sweep.skipped}
    outcomes = _outcomes(sweep, cells, skipped)
    total = len(cells) - len(skipped)  # skipped cells are planned ones
    line = f"{total} cells: " + ", ".join(_parts(outcomes, skipped))
    if sweep.strategy:  # an adaptive sweep: each row's seeds and why it stopped, or its trials and choice
        line += strategy_summary(sweep.strategy)
    untuned = [r for r in sweep.strategy.rows if isinstance(sweep.strategy, TuneState) and not r.best] \
        if sweep.strategy else []  # no values to run seeds with
    if interrupted_by:
        status = interrupted_by
    elif any(outcomes[word] for word in (FAILED, INTERRUPTED, RUNNING, MISSING)) or untuned:
        status = 1
    else:
        status = 0
    return line, status


def _outcomes(sweep, cells: dict, skipped: set) -> dict:
    """Each outcome (OK, TIME_CAPPED, FAILED, INTERRUPTED, RUNNING, MISSING) -> the labels of the
    ``cells`` (name -> its plan's values) not ``skipped`` that had it; a time-capped cell is ok too.
    A label names the keys that vary over all the planned cells, skipped ones included."""
    records = {c.name: c.record for c in sweep.cells}
    unreadable = {name for name, _ in sweep.unreadable}
    keys = {k for values in cells.values() for k in values}
    varying = {k for k in keys if len({str(values.get(k)) for values in cells.values()}) > 1}
    outcomes = {word: [] for word in (OK, TIME_CAPPED, FAILED, INTERRUPTED, RUNNING, MISSING)}
    for name, values in cells.items():
        if name in skipped:
            continue
        label, record = _label(values, varying), records.get(name)
        if record is None:
            outcomes[MISSING].append(f"{label} (result.json unreadable)" if name in unreadable else label)
        elif (status := status_of(record)) in (OK, INTERRUPTED, RUNNING):
            outcomes[status].append(label)
            if status == OK and time_capped(record):
                outcomes[TIME_CAPPED].append(label)
        else:
            outcomes[FAILED].append(f"{label} ({_short(error_of(record))})")
    return outcomes


def _parts(outcomes: dict, skipped) -> list:
    """``["11 ok", "1 failed: lr=1e9,... (loss is inf at update 3)"]``: each outcome some cell had."""
    capped = outcomes[TIME_CAPPED]
    parts = [f"{len(outcomes[OK])} ok" + (f" ({len(capped)} stopped at the time cap: {'; '.join(capped)})"
                                          if capped else "")]
    for word, items in ((FAILED, outcomes[FAILED]), (INTERRUPTED, outcomes[INTERRUPTED]),
                        ("still running or killed outright", outcomes[RUNNING]), ("not run", outcomes[MISSING])):
        if items:
            parts.append(f"{len(items)} {word}: " + "; ".join(items))
    if skipped:
        parts.append(f"{len(skipped)} skipped by design")
    return parts
