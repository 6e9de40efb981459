"""How a sweep ended, in one line, and the exit status that says the same:
``12 cells: 11 ok, 1 failed: lr=1e9,placement=both,seed=1 (loss is inf at update 3)``.

Counted from the sweep directory (the plan in Hydra's ``multirun.yaml`` and each cell's
``result.json``), so it holds whichever launcher ran the cells and in whichever processes.
"""

from pathlib import Path

from posenc.report.plan import planned_cells
from posenc.report.records import RESULT_FILE, read_result, time_capped

# The exit status of the sweep, set when it ends (Hydra's on_multirun_end) and used by posenc-run.
SWEEP_EXIT = {"status": 0}


def _short(error: str) -> str:
    """The reason without its log path (the cell's directory has the log)."""
    return (error or "no reason recorded").split(" (log: ")[0]


def _label(values: dict, varying: set) -> str:
    shown = {k: v for k, v in values.items() if k in varying} or values
    return ",".join(f"{k}={v}" for k, v in shown.items())


def summarize(sweep_dir: Path, interrupted_by: int = 0):
    """``(line, exit status)`` for the sweep in ``sweep_dir``: 0 when every planned cell is ok
    (or skipped by design), 1 when any failed or never reported, ``interrupted_by`` (128 + the
    signal) when this run was stopped by a signal."""
    sweep_dir = Path(sweep_dir)
    plan = planned_cells(sweep_dir)
    if plan is None:  # no multirun.yaml: whatever reported
        cells = [(p.parent.name, {"cell": p.parent.name}, "") for p in sorted(sweep_dir.glob(f"*/{RESULT_FILE}"))]
    else:
        cells = [(c.dirname, c.values, c.skip_reason) for c in plan]
    keys = {k for _, values, _ in cells for k in values}
    varying = {k for k in keys if len({str(values.get(k)) for _, values, _ in cells}) > 1}
    ok, skipped, failed, interrupted, missing, capped = 0, 0, [], [], [], []
    for dirname, values, skip in cells:
        label = _label(values, varying)
        if skip:
            skipped += 1
            continue
        path = sweep_dir / dirname / RESULT_FILE
        record = read_result(sweep_dir / dirname)
        if record is None:
            missing.append(f"{label} (result.json unreadable)" if path.exists() else label)
        elif record.get("status") == "ok":
            ok += 1
            if time_capped(record):
                capped.append(label)
        elif record.get("status") == "interrupted":
            interrupted.append(label)
        else:
            failed.append(f"{label} ({_short(record.get('error', ''))})")
    total = len(cells) - skipped
    parts = [f"{ok} ok" + (f" ({len(capped)} stopped at the time cap: {'; '.join(capped)})" if capped else "")]
    for word, items in (("failed", failed), ("interrupted", interrupted), ("not run", missing)):
        if items:
            parts.append(f"{len(items)} {word}: " + "; ".join(items))
    if skipped:
        parts.append(f"{skipped} skipped by design")
    line = f"{total} cells: " + ", ".join(parts)
    if interrupted_by:
        status = interrupted_by
    elif failed or interrupted or missing:
        status = 1
    else:
        status = 0
    return line, status
