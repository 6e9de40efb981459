"""An adaptive sweep's state, typed: one class per strategy (``SeedsState`` for
``hydra/sweeper=posenc_seeds``, ``TuneState`` for ``hydra/sweeper=posenc_tune``), read by
``read_state`` and written by ``write_state`` and by nothing else.

The state is the sweep's plan for every reader (the cells launched so far, each row's seeds or
trials and why it stopped); the sweeper writes it before each batch runs. Readers ask the state
what they need (``cells``, ``tuned_keys``, ``trial``) instead of testing which strategy wrote it.

Settings and looks are typed in the state (``SeedsSettings``, ``OldRuleSettings``,
``TuneSettings``, ``posenc.stats.sequential.Look``); JSON exists only in the file, read by
``of`` and written by ``to_json``. A seeds state written before the group sequential rule (its
settings have ``min_seeds`` and no ``spending``) still reads: its settings are ``OldRuleSettings``,
``SeedsState.old_rule`` says so, and its rows keep the plan they booked (``planned``) and no looks.
"""

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from posenc.atomic import write_json_atomic
from posenc.cells.rows import BASELINE, baseline_of
from posenc.stats.sequential import DESIGN_SETTINGS, Design, Look, design_of

# The seeds strategy's state file, and the tune strategy's; the tune strategy's Optuna studies,
# one per row, in Optuna's journal file, which several processes share.
SEEDS_FILE = "seeds_strategy.json"
TUNE_FILE = "tune_strategy.json"
STUDY_FILE = "tune_study.journal"


class StateError(ValueError):
    """A state file that no strategy wrote; the message is one line naming the file."""


@dataclass(frozen=True)
class SeedsSettings:
    """The seeds strategy's settings: the design (its thresholds fixed before the pilot) and what the
    strategy adds (``SeedsPlanConf``). The planner checks them (``planner.checked_settings``)."""
    design: Design
    effect: object
    test_size: object
    baseline: object
    batch_seeds: object
    predates: frozenset = frozenset()   # design settings its state was written without: it ran OLDER's

    @classmethod
    def of(cls, flat: dict) -> "SeedsSettings":
        """From the settings as they are set, flat (a state's, or the sweeper's over its defaults); a
        design setting a state predates is what it ran then (``sequential.OLDER``)."""
        return cls(design_of(flat), flat.get("effect"), flat.get("test_size"), flat.get("baseline"),
                   flat.get("batch_seeds"), frozenset(k for k in DESIGN_SETTINGS if k not in flat))

    def as_state(self) -> dict:
        """The settings as the state keeps them (flat, as they are set; a setting it predates stays out)."""
        return {**{k: getattr(self.design, k) for k in DESIGN_SETTINGS if k not in self.predates},
                "effect": float(self.effect),
                "test_size": self.test_size, "baseline": str(self.baseline), "batch_seeds": self.batch_seeds}


@dataclass(frozen=True)
class OldRuleSettings:
    """The settings of a seeds sweep run by the rule before the group sequential design (plans from
    the seeds' spread; ``min_seeds`` None where it ran before that floor existed). Read, never run."""
    effect: object = None
    test_size: object = None
    baseline: object = None
    pilot_seeds: object = None
    max_seeds: object = None
    batch_seeds: object = None
    min_seeds: object = None

    @classmethod
    def of(cls, flat: dict) -> "OldRuleSettings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in flat.items() if k in known})

    def as_state(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "min_seeds" or v is not None}


def seeds_settings_of(flat: dict):
    """A seeds state's settings: ``OldRuleSettings`` where the old rule wrote them (no ``spending``)."""
    return SeedsSettings.of(flat) if "spending" in flat else OldRuleSettings.of(flat)


@dataclass(frozen=True)
class TuneSettings:
    """The tune strategy's settings and their defaults, the one home of both: the sweeper's structured
    config (``posenc.harness.sweep.config.TuneSweeperConf``) takes its fields, the planner checks
    them (``posenc.harness.sweep.tune_planner.checked``) and the state keeps them (``of``, ``as_state``).
    The grid and the search space are the sweep's, not settings: the state keeps them apart.
    Every field is ``Any``: the planner checks each value and refuses a bad one in one line.

    ``seeds_strategy``: None (each row's best values run ``seeds`` seeds), else the seeds strategy's
    settings, a dict as given and ``SeedsSettings`` (``OldRuleSettings``: the old rule's) once checked."""
    trials: Any = 8                   # trials per row
    batch_trials: Any = 1             # trials per row launched together
    startup_trials: Any = 4           # random trials before TPE models the finished ones
    sampler_seed: Any = 0
    pruner: Any = None                # null | median | asha
    prune_from_epoch: Any = 1
    pruner_startup_trials: Any = 2
    trial_seed: Any = 0
    seeds: Any = 3                    # seeds each row's best values run (without seeds_strategy)
    seeds_strategy: Any = None
    baseline: Any = BASELINE

    @classmethod
    def of(cls, flat: dict) -> "TuneSettings":
        """As a state keeps them; a setting its state predates reads None (what ran then is not
        recorded; ``ran`` says what it was where the harness knows)."""
        given = {f.name: flat.get(f.name) for f in fields(cls)}
        plan = given["seeds_strategy"]
        given["seeds_strategy"] = seeds_settings_of(dict(plan)) if plan else None
        return cls(**given)

    def ran(self, name: str):
        """A setting as its sweep ran it: a state written before the setting existed ran its default."""
        value = getattr(self, name)
        return getattr(TuneSettings(), name) if value is None else value

    def as_state(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["seeds_strategy"] = None if self.seeds_strategy is None else self.seeds_strategy.as_state()
        return out


@dataclass
class StateCell:
    dirname: str          # the cell's directory under the sweep directory
    overrides: list       # every override of the cell, seed included


@dataclass
class SeedsRow:
    row: str                      # its swept values, e.g. placement=none
    overrides: list = field(default_factory=list)   # every job's overrides, without seed
    baseline: bool = False        # the row others are compared with
    seeds: list = field(default_factory=list)       # its seeds that finished ok
    stopped: str = ""             # "" while it goes on; else why (sequential.py's stop names)
    why: str = ""                 # the stop in the table's words (``efficacy at 3 seeds``)
    verdict: str = ""             # frozen at the stop: better, worse, no evidence
    looks: list = field(default_factory=list)       # sequential.Look, in the order they were taken
    look_seeds: list = field(default_factory=list)  # each look's paired seeds (a state before issue 49 has none)
    ci: list = None               # the repeated CI of Δ at the stopping look, at ci_level
    stop_n: int = None            # the stopping look's seeds (an efficacy stop by a retest: an earlier look)
    level: float = None           # the α its family gave it at the stopping look (its verdict's)
    ci_level: float = None        # its interval's α: α/m, fixed before the pilot (None: a state before issue 60,
                                  # whose ci is at ``level``)
    unreachable: str = ""         # why the design cannot reach 80% power at the planned effect ("" if it can)
    planned: object = None        # the seeds its last plan booked: only a sweep of the old rule has one

    @classmethod
    def of(cls, data: dict) -> "SeedsRow":
        known = {f.name for f in fields(cls)}
        row = cls(**{k: v for k, v in data.items() if k in known})
        row.looks = [Look.coerce(x) for x in row.looks]
        return row

    def stop_look(self):
        """The look a stopped row stopped at (its Δ, CI and seeds are the table's), else its latest;
        None without looks. A state written before stop_n was kept stopped at its latest look."""
        if self.stop_n is not None:
            return next(x for x in self.looks if x.n == self.stop_n)
        return self.looks[-1] if self.looks else None


def row_json(row: SeedsRow) -> dict:
    """A row as its state keeps it; a state written before the looks' seeds or the interval's level
    were kept stays as it was."""
    out = asdict(row)
    if not out["look_seeds"]:
        del out["look_seeds"]
    if out["ci_level"] is None:
        del out["ci_level"]
    return out


def family_size(grids: list, index: int, baseline) -> int:
    """The rows compared with the baseline row of row ``index`` (its family's m, its own included),
    of the rows whose grid values (``key=value`` overrides, seed left out) are ``grids``, with the
    sweep's ``baseline`` (``placement=both``); 0 for a baseline or a row without one."""
    key, _, value = str(baseline).partition("=")
    values = [{k.lstrip("+~"): v for k, v in (line.split("=", 1) for line in grid)} for grid in grids]
    bases = baseline_of(values, key.lstrip("+~"), value)
    mine = bases[index]
    if mine is None or mine == index:
        return 0
    return sum(1 for i, b in enumerate(bases) if b == mine and b != i)


def design_hash(settings, rows: list) -> str:
    """The design and the family of rows it decides, as 12 hex digits of the SHA-256 of their
    canonical JSON: what a reader checks that the state and the table were decided under."""
    text = json.dumps({"settings": settings.as_state(), "rows": [list(r.overrides) for r in rows]},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class SeedsState:
    settings: object              # SeedsSettings (OldRuleSettings: the old rule's sweep), as the sweep ran them
    rows: list                    # SeedsRow, in grid order
    cells: list                   # StateCell: every cell launched so far
    strategy: str = "seeds"
    adopted: list = field(default_factory=list)   # cells found in the directory before its first look (adopt)
    design: str = ""              # design_hash at the first launch ("" in a state written before it was kept)

    FILE = SEEDS_FILE

    @property
    def old_rule(self) -> bool:
        """Written by the rule before the group sequential design (min_seeds, plans from the spread)."""
        return isinstance(self.settings, OldRuleSettings)

    def tuned_keys(self) -> set:
        return set()

    def seeds_settings(self):
        """The settings of the seeds strategy that sized its seeds."""
        return self.settings

    def sequential_rows(self) -> list:
        """The rows decided by the group sequential design (none for the old rule's state)."""
        return [] if self.old_rule else self.rows

    def family_size(self, row: SeedsRow) -> int:
        """The m of ``row``'s family: the rows compared with its baseline row."""
        return family_size([r.overrides for r in self.rows], self.rows.index(row), self.settings.baseline)

    def trial(self, dirname: str):
        return None

    def to_json(self) -> dict:
        out = {"strategy": self.strategy, "settings": self.settings.as_state(),
               "rows": [row_json(r) for r in self.rows], "cells": [asdict(c) for c in self.cells]}
        out = {**out, "design_hash": self.design} if self.design else out
        return {**out, "adopted": list(self.adopted)} if self.adopted else out

    @classmethod
    def of(cls, data: dict) -> "SeedsState":
        state = cls(seeds_settings_of(dict(data.get("settings") or {})), [SeedsRow.of(r) for r in data.get("rows", [])],
                    [StateCell(c["dirname"], list(c["overrides"])) for c in data["cells"]],
                    adopted=list(data.get("adopted") or []), design=str(data.get("design_hash") or ""))
        now = design_hash(state.settings, state.rows) if state.design else ""
        if now != state.design:
            raise StateError(f"its design or rows were changed after the first launch (design_hash {state.design}, "
                             f"now {now}); allowed: the file as the sweep wrote it, or a new hydra.sweep.dir")
        return state


@dataclass
class Trial:
    number: int
    dirname: str
    overrides: list
    values: dict                  # key -> the value it ran with, as its override writes it
    state: str = ""               # Optuna's name for the trial's state (COMPLETE, PRUNED, FAIL, RUNNING)
    value: float = None           # its validation loss
    error: str = ""
    study: str = ""               # its row's study

    @classmethod
    def of(cls, data: dict, study: str = "") -> "Trial":
        known = {f.name for f in fields(cls)}
        return cls(**{"overrides": [], "values": {}, "study": study,
                      **{k: v for k, v in data.items() if k in known}})


@dataclass(frozen=True)
class BestTrial:
    """A row's best trial so far: its number, validation loss and values (key -> the value as its
    override writes it)."""
    number: int
    value: float
    values: dict


@dataclass
class TuneRow:
    row: str                      # its swept values; also its study's name
    overrides: list
    trials: list = field(default_factory=list)      # Trial
    best: BestTrial = None        # once a trial finished ok
    seeds: list = field(default_factory=list)       # the best values' seeds launched
    plan: SeedsRow = None         # with seeds_strategy: its seeds' sequential state

    @property
    def study(self) -> str:
        return self.row

    @property
    def best_overrides(self) -> list:
        """The overrides of its best trial's values (``optim.args.lr=0.0012``), the row's seeds run with."""
        return [f"{k}={v}" for k, v in self.best.values.items()]

    def to_json(self) -> dict:
        out = {"row": self.row, "overrides": self.overrides, "study": self.study,
               "trials": [asdict(t) for t in self.trials],
               "best": None if self.best is None else asdict(self.best), "seeds": self.seeds}
        if self.plan is not None:
            out["plan"] = row_json(self.plan)
        return out

    @classmethod
    def of(cls, data: dict) -> "TuneRow":
        plan, best = data.get("plan"), data.get("best")
        return cls(data["row"], list(data.get("overrides", [])),
                   [Trial.of(t, data["row"]) for t in data.get("trials", [])], BestTrial(**best) if best else None,
                   list(data.get("seeds") or []), None if plan is None else SeedsRow.of({"row": data["row"], **plan}))


@dataclass
class TuneState:
    settings: TuneSettings
    search_space: dict
    rows: list                    # TuneRow
    cells: list                   # StateCell: the best values' seeds
    strategy: str = "tune"

    FILE = TUNE_FILE

    def seeds_settings(self):
        """The seeds strategy's settings that sized the best values' seeds, or None (a fixed count)."""
        return self.settings.seeds_strategy

    def sequential_rows(self) -> list:
        """The best values' rows as the seeds strategy's group sequential design decided them."""
        sequential = isinstance(self.settings.seeds_strategy, SeedsSettings)
        return [r.plan for r in self.rows if r.plan is not None] if sequential else []

    def family_size(self, plan: SeedsRow) -> int:
        """The m of a best values' row's family (``plan``: its ``TuneRow.plan``): the tuned rows
        compared with its baseline row, by their grid values (not their best values)."""
        rows = [r for r in self.rows if r.plan is not None]
        index = next(i for i, r in enumerate(rows) if r.plan is plan)
        return family_size([r.overrides for r in rows], index, self.settings.seeds_strategy.baseline)

    def tuned_keys(self) -> set:
        """The keys each row chose (its search space): values of a row, not rows."""
        return {key.lstrip("+~") for key in self.search_space or {}}

    def trial(self, dirname: str):
        """The trial whose cell is ``dirname``, or None."""
        return next((t for r in self.rows for t in r.trials if t.dirname == dirname), None)

    def to_json(self) -> dict:
        return {"strategy": self.strategy, "settings": self.settings.as_state(), "search_space": self.search_space,
                "rows": [r.to_json() for r in self.rows],
                "trials": [{"dirname": t.dirname, "study": r.study, "number": t.number} for r in self.rows
                           for t in r.trials],
                "cells": [asdict(c) for c in self.cells]}

    @classmethod
    def of(cls, data: dict) -> "TuneState":
        rows = [TuneRow.of(r) for r in data.get("rows", [])]
        listed = {t.dirname for r in rows for t in r.trials}
        for entry in data.get("trials", []):  # a state that names trials only in its list (a trial's pruning reads it)
            if entry["dirname"] not in listed:
                row = next((r for r in rows if r.study == entry.get("study")), None)
                if row is None:
                    row = TuneRow(entry.get("study", ""), [])
                    rows.append(row)
                row.trials.append(Trial.of(entry, entry.get("study", "")))
        return cls(TuneSettings.of(dict(data.get("settings") or {})), dict(data.get("search_space") or {}),
                   rows, [StateCell(c["dirname"], list(c["overrides"])) for c in data["cells"]])


STATES = {SeedsState.FILE: SeedsState, TuneState.FILE: TuneState}


def read_state(sweep_dir: Path):
    """An adaptive sweep's state (``SeedsState`` or ``TuneState``), or None for a sweep of a fixed
    grid; ``StateError`` naming the file where it is not a state."""
    for name, kind in STATES.items():
        path = Path(sweep_dir) / name
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
                raise TypeError("no list of cells")
            return kind.of(data)
        except StateError as err:
            raise StateError(f"{path}: {err}") from None
        except (ValueError, TypeError, KeyError) as err:
            raise StateError(f"{path}: not an adaptive sweep's state ({err})") from None
    return None


def write_state(sweep_dir: Path, state) -> None:
    """The state as it stands, atomically: readers never see half of it."""
    write_json_atomic(Path(sweep_dir) / state.FILE, state.to_json())
