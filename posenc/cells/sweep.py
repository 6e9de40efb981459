"""A sweep directory as every reader sees it: the cells that reported (every ``result.json``
below it, nested ones included), the cells its plan names that never did, the records that could
not be read, and the cells the plan leaves out by design.

The summary line and the ETA (``posenc.harness``), ``posenc-table`` (``posenc.report``) and
``posenc-pe sweep`` (``posenc.analysis``) all read a sweep with ``read_sweep``; the seeds sweeper
asks ``reported_cells`` which cells a directory already holds. This module is the one walk of a
sweep directory for its records.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from posenc.cells import keys
from posenc.cells.layout import RESULT_FILE
from posenc.cells.plan import PLAN_FILE, override_values, planned_cells
from posenc.cells.record import Record, is_trial
from posenc.cells.strategy import read_state

# Keys a record carries itself; any other key a sweep varies (``+model.args.dropout=0.1,0.2``,
# ``budget=smoke,cpu``) becomes a column of its own, so its cells are never averaged together.
RECORD_KEYS = ("model", "pe", "data", "placement")
# libyaml's loader where PyYAML has it (a 1,000-cell sweep reads 1,000 files), else the pure one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# The status of a cell without a readable record.
MISSING = "missing"
UNREADABLE = "unreadable"


class SweepError(ValueError):
    """A sweep directory that cannot be read at all; the message is one line."""


@dataclass
class Cell:
    name: str        # its directory, relative to the sweep directory
    dir: Path
    record: Record   # None for a cell that is missing or unreadable
    overrides: dict = field(default_factory=dict)  # key -> value (str) of its overrides, '+' prefixes dropped
    values: dict = field(default_factory=dict)     # the plan's values of its overrides ({} when unplanned)
    status: str = ""  # the record's status, or MISSING (planned, no record) or UNREADABLE

    def __post_init__(self):
        if self.record is not None:
            self.status = "unknown" if "status" in self.record.absent else str(self.record.status)


@dataclass
class Sweep:
    dir: Path
    cells: list = field(default_factory=list)       # cells with a readable record, in directory order
    missing: list = field(default_factory=list)     # planned cells without a result.json
    unreadable: list = field(default_factory=list)  # (cell, why): a result.json that could not be read
    skipped: list = field(default_factory=list)     # (cell, why): left out by design (grid sweeps)
    extra_keys: list = field(default_factory=list)  # swept keys beyond the record's own
    planned: bool = False                           # the plan was read: missing cells are known
    plan_values: dict = field(default_factory=dict)  # planned cell -> its overrides' values, in launch order
    plan_note: str = ""                             # why no plan was read, where one could not be
    strategy: object = None                         # an adaptive sweep's state (posenc.cells.strategy), or None
    trials: list = field(default_factory=list)      # a tune strategy's trial cells: validated, never scored on test

    @property
    def label(self) -> str:
        return self.dir.name

    @property
    def records(self):
        return [c.record for c in self.cells]

    @property
    def empty(self) -> bool:
        return not self.cells and not self.missing and not self.unreadable

    def every_cell(self) -> list:
        """Every cell that reported or was planned and not skipped, by name: those without a
        readable record have ``record`` None and status ``unreadable`` or ``missing``."""
        found = list(self.cells)
        found += [Cell(name, self.dir / name, None, status=UNREADABLE) for name, _ in self.unreadable]
        found += [Cell(name, self.dir / name, None, status=MISSING) for name in self.missing]
        return sorted(found, key=lambda cell: cell.name)

    def require_cells(self) -> "Sweep":
        if self.empty:
            raise SweepError(f"{self.dir}: no {RESULT_FILE} below it and no {PLAN_FILE} plan")
        return self


def reported_cells(sweep_dir) -> list:
    """The cells below ``sweep_dir`` that hold a ``result.json`` (nested ones included), each as its
    directory's name relative to ``sweep_dir``, sorted; [] where there is no such directory."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        return []
    return [str(path.parent.relative_to(sweep_dir)) for path in sorted(sweep_dir.rglob(RESULT_FILE))]


def read_sweep(sweep_dir) -> Sweep:
    """The sweep in ``sweep_dir``; SweepError when it is not a directory. A plan that cannot be
    read never hides the cells that reported (``plan_note`` says why it was not used)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise SweepError(f"{sweep_dir}: no such sweep directory")
    sweep = Sweep(dir=sweep_dir)
    plan = _plan(sweep)
    planned = {c.dirname: c for c in plan or []}
    sweep.plan_values = {c.dirname: c.values for c in plan or []}
    for name in reported_cells(sweep_dir):
        record, why = Record.read_why(sweep_dir / name)
        if record is None:
            sweep.unreadable.append((name, why))
            continue
        values = planned[name].values if name in planned else {}
        overrides = _as_strings(values) if name in planned else _hydra_overrides(sweep_dir / name)
        # A tuning trial is not a cell of the sweep's table: its readers ask for ``trials``.
        (sweep.trials if is_trial(record) else sweep.cells).append(Cell(name, sweep_dir / name, record, overrides,
                                                                        values))
    reported = {c.name for c in sweep.cells} | {name for name, _ in sweep.unreadable}
    for cell in plan or []:
        if cell.skip_reason:
            sweep.skipped.append((cell.dirname, cell.skip_reason))
        elif cell.dirname not in reported:
            sweep.missing.append(cell.dirname)
    sweep.extra_keys = _varying_keys(sweep.cells, sweep.strategy.tuned_keys() if sweep.strategy else ())
    return sweep


def _plan(sweep: Sweep):
    if not (sweep.dir / PLAN_FILE).exists():
        sweep.plan_note = f"no {PLAN_FILE}: cells that never reported cannot be named"
        return None
    try:
        plan = planned_cells(sweep.dir)
    except Exception as exc:  # noqa: BLE001 -- a foreign or broken plan must not hide the cells that did report
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        sweep.plan_note = (f"{PLAN_FILE} could not be read ({type(exc).__name__}: {first}); "
                           "only cells that reported are listed")
        return None
    sweep.planned = True
    sweep.strategy = read_state(sweep.dir)
    return plan


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
        lines = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER) or []
        return _as_strings(override_values([str(line) for line in lines]))
    except Exception:  # noqa: BLE001 -- a foreign or torn file: the cell just has no extra keys
        return {}


def _varying_keys(cells, tuned=frozenset()) -> list:
    swept = sorted({k for c in cells for k in c.overrides} - set(RECORD_KEYS) - keys.not_a_row() - set(tuned))
    return [k for k in swept if len({c.overrides.get(k, "") for c in cells}) > 1]
