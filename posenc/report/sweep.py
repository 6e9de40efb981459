"""A sweep directory as the report sees it: the records of the cells that reported, the cells its
plan names that never did, the files that could not be read, and each cell's own overrides."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from posenc.report.plan import override_values, planned_cells
from posenc.report.records import RESULT_FILE

# Keys a record carries itself; any other key a sweep varies (``+model.args.dropout=0.1,0.2``,
# ``budget=smoke,cpu``) becomes a column of its own, so its cells are never averaged together.
RECORD_KEYS = ("model", "pe", "data", "placement")
NOT_A_ROW_KEY = {"seed", "experiment", "redo"}


class SweepError(ValueError):
    """A sweep directory the table cannot be made from; the message is one line."""


@dataclass
class Cell:
    name: str        # its directory, relative to the sweep directory
    dir: Path
    record: dict
    overrides: dict  # key -> value (str) of this cell's overrides, '+' prefixes dropped


@dataclass
class Sweep:
    dir: Path
    cells: list = field(default_factory=list)
    missing: list = field(default_factory=list)     # planned cells without a result.json
    unreadable: list = field(default_factory=list)  # result.json files that could not be read
    skipped: list = field(default_factory=list)     # (cell, why): left out by design (grid sweeps)
    extra_keys: list = field(default_factory=list)  # swept keys beyond the record's own

    @property
    def label(self) -> str:
        return self.dir.name

    @property
    def records(self):
        return [c.record for c in self.cells]


def load_sweep(sweep_dir) -> Sweep:
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise SweepError(f"{sweep_dir}: no such sweep directory")
    sweep = Sweep(dir=sweep_dir)
    plan = planned_cells(sweep_dir)
    planned = {c.dirname: c for c in plan or []}
    for path in sorted(sweep_dir.rglob(RESULT_FILE)):
        name = str(path.parent.relative_to(sweep_dir))
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as err:
            sweep.unreadable.append(f"{name}/{RESULT_FILE}: {type(err).__name__}")
            continue
        if not isinstance(record, dict):
            sweep.unreadable.append(f"{name}/{RESULT_FILE}: not a JSON object")
            continue
        record["_cell"] = name
        overrides = _as_strings(planned[name].values) if name in planned else _hydra_overrides(path.parent)
        sweep.cells.append(Cell(name, path.parent, record, overrides))
    reported = {c.name for c in sweep.cells} | {u.split(f"/{RESULT_FILE}")[0] for u in sweep.unreadable}
    for cell in plan or []:
        if cell.skip_reason:
            sweep.skipped.append((cell.dirname, cell.skip_reason))
        elif cell.dirname not in reported:
            sweep.missing.append(cell.dirname)
    if not sweep.cells and not sweep.missing and not sweep.unreadable:
        raise SweepError(f"{sweep_dir}: no {RESULT_FILE} below it and no multirun.yaml plan")
    sweep.extra_keys = _varying_keys(sweep.cells)
    return sweep


def _as_strings(values: dict) -> dict:
    return {key.lstrip("+~"): _text(value) for key, value in values.items()}


def _text(value) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _hydra_overrides(job_dir: Path) -> dict:
    """The job's own overrides from Hydra's ``.hydra/overrides.yaml`` (a sweep without its plan),
    parsed as the plan parses them."""
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    try:
        lines = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader) or []
        return _as_strings(override_values([str(line) for line in lines]))
    except Exception:  # noqa: BLE001 -- a foreign or torn file: the cell just has no extra keys
        return {}


def _varying_keys(cells) -> list:
    keys = sorted({k for c in cells for k in c.overrides} - set(RECORD_KEYS) - NOT_A_ROW_KEY)
    return [k for k in keys if len({c.overrides.get(k, "") for c in cells}) > 1]
