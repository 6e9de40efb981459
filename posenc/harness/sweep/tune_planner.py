"""The tune strategy's planner, with no Hydra in it: given the grid's rows (each a ``TuneRow``) and
its settings, it asks each row's Optuna study (``posenc.harness.study``) for trials, tells it what
their cells recorded, and then plans each row's best values' seeds: ``seeds`` of them, or as many as
the seeds strategy's planner (``posenc.harness.sweep.planner``, ``seeds_strategy``) decides. The
Hydra sweeper (``posenc.harness.sweep.tune``) reads the grid, checks each search-space key against
the cell's config, and launches what ``next_jobs`` asks for (``LaunchingSweeper.drive``).

A trial's objective is its validation loss; it never scores the test split. Batches of trials
(``batch_trials`` per row, every row's together) until ``trials`` per row; a trial that never
finished (a rerun) is asked for again before new ones.
"""

from dataclasses import replace
from pathlib import Path

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from posenc.cells.record import Record, is_failed, is_ok, is_pruned
from posenc.cells.strategy import (
    TUNE_FILE,
    BestTrial,
    SeedsRow,
    SeedsSettings,
    SeedsState,
    StateCell,
    Trial,
    TuneRow,
    TuneSettings,
    TuneState,
)
from posenc.harness import study as studies
from posenc.harness.sweep.config import SEEDS_SETTINGS
from posenc.harness.sweep.planner import (
    SEED,
    Launch,
    PlannedRow,
    SeedsPlanner,
    StrategyError,
    checked_settings,
    link_baselines,
    new_design_check,
    value_in,
)
from posenc.report.rows import parse_baseline

TRIAL = "trial"
SPEC_KEYS = {"type", "low", "high", "log", "choices"}
TYPES = ("float", "int", "categorical")
RUNNING = TrialState.RUNNING.name  # a trial's state in the strategy's state is Optuna's name for it
TRIALS, SEEDS, DONE = "trials", "seeds", "done"  # the planner's phases, in order


def space_distributions(space: dict) -> dict:
    """``{key: optuna distribution}`` for the config's search space; StrategyError naming the key
    and what it may be otherwise."""
    if not space:
        raise StrategyError("hydra.sweeper.search_space is empty; allowed: one or more keys, e.g. "
                            "hydra.sweeper.search_space='{optim.args.lr: {low: 1e-4, high: 1e-2, log: true}}'")
    out = {}
    for key, spec in space.items():
        where = f"hydra.sweeper.search_space.{key}"
        if not isinstance(spec, dict):
            raise StrategyError(f"{where}={spec!r} is not allowed; allowed: {{low: L, high: H}} (type float or int, "
                                "log true/false) or {choices: [...]}")
        unknown = sorted(set(spec) - SPEC_KEYS)
        if unknown:
            raise StrategyError(f"{where}: {unknown[0]!r} is not a setting of a search space; allowed: "
                                f"{', '.join(sorted(SPEC_KEYS))}")
        kind = spec.get("type", "categorical" if "choices" in spec else "float")
        if kind not in TYPES:
            raise StrategyError(f"{where}.type={kind!r} is not allowed; allowed: {', '.join(TYPES)}")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices or any(isinstance(c, (list, dict)) for c in choices):
                raise StrategyError(f"{where}.choices={choices!r} is not allowed; allowed: a non-empty list of values")
            out[key] = CategoricalDistribution(choices)
            continue
        low, high, logscale = spec.get("low"), spec.get("high"), spec.get("log", False)
        number = int if kind == "int" else (int, float)
        for name, value in (("low", low), ("high", high)):
            if isinstance(value, bool) or not isinstance(value, number):
                raise StrategyError(f"{where}.{name}={value!r} is not allowed; allowed: "
                                    + ("a whole number" if kind == "int" else "a number"))
        if not isinstance(logscale, bool):
            raise StrategyError(f"{where}.log={logscale!r} is not allowed; allowed: true or false")
        if not low < high:
            raise StrategyError(f"{where}: low={low} is not below high={high}; allowed: low < high")
        if logscale and low <= 0:
            raise StrategyError(f"{where}: low={low} on a log scale; allowed: low > 0 with log: true")
        out[key] = (IntDistribution(low, high, log=logscale) if kind == "int"
                    else FloatDistribution(float(low), float(high), log=logscale))
    return out


def override_text(key: str, value) -> str:
    """A proposed value as the override its cell runs with: floats to 4 significant digits (what the
    directory is named after and the table shows)."""
    if isinstance(value, float):
        value = f"{value:.4g}"
    return f"{key}={value}"


COUNTS = ("trials", "batch_trials", "startup_trials", "prune_from_epoch", "pruner_startup_trials", "seeds")
FROM_ZERO = ("startup_trials", "prune_from_epoch", "pruner_startup_trials")   # counts that may be 0


def checked(settings: TuneSettings) -> TuneSettings:
    """The settings as given (plain values), checked, as the planner runs them and the state keeps
    them: the seeds strategy's as ``SeedsSettings``. StrategyError naming the first bad one."""
    for name in COUNTS:
        value, low = getattr(settings, name), 0 if name in FROM_ZERO else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise StrategyError(f"hydra.sweeper.{name}={value!r} is not allowed; allowed: a whole number >= {low}")
    for name in ("sampler_seed", "trial_seed"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise StrategyError(f"hydra.sweeper.{name}={value!r} is not allowed; allowed: a whole number >= 0")
    if settings.pruner is not None and settings.pruner not in studies.PRUNERS:
        raise StrategyError(f"hydra.sweeper.pruner={settings.pruner!r} is not allowed; allowed: null, "
                            + ", ".join(studies.PRUNERS))
    # its own refusals, named hydra.sweeper.<key> as the seeds strategy names them
    seeds_strategy = None if settings.seeds_strategy is None else seeds_strategy_settings(settings)
    try:
        parse_baseline(str(settings.baseline))
    except ValueError as err:
        raise StrategyError(f"hydra.sweeper.baseline: {err}") from None
    return replace(settings, baseline=str(settings.baseline), seeds_strategy=seeds_strategy)


def seeds_strategy_settings(settings: TuneSettings) -> SeedsSettings:
    """The seeds strategy's settings that size the best values' seeds (``seeds_strategy``), checked."""
    given = settings.seeds_strategy
    allowed = set(SEEDS_SETTINGS) - {"baseline"}
    if not isinstance(given, dict) or set(given) - allowed:
        unknown = sorted(set(given) - allowed) if isinstance(given, dict) else [repr(given)]
        raise StrategyError(f"hydra.sweeper.seeds_strategy: {unknown[0]} is not a setting of the seeds strategy; "
                            f"allowed: null or a dict of {', '.join(sorted(allowed))}")
    return checked_settings({**given, "baseline": settings.baseline})


def family_size(rows: list, baseline) -> int:
    """The most rows compared with one baseline row: rows equal in every other override."""
    key, value = parse_baseline(str(baseline))
    groups = {}
    for row in rows:
        rest = tuple(sorted(o for o in row.overrides if o.split("=", 1)[0].lstrip("+~") != key))
        mine = str(value_in(row.overrides, key))
        groups[rest] = groups.get(rest, 0) + (mine != str(value))
    return max([*groups.values(), 1])


class TunePlanner:
    """``next_jobs(sweep)`` after every batch (the trials, then the best values' seeds); ``state()``
    for the state file. ``name(overrides) -> dirname`` names a cell as the launcher will."""

    def __init__(self, settings: TuneSettings, rows: list, space: dict, sweep_dir: Path, name,
                 before: TuneState = None):
        self.settings, self.rows, self.space = settings, rows, space   # settings: as ``checked`` gives them
        self.distributions = space_distributions(space)
        self.sweep_dir, self.name, self.before = Path(sweep_dir), name, before
        self.row_index = {row.row: index for index, row in enumerate(rows)}  # seeds each row's sampler
        self.phase, self.launched, self.seeds_planner, self.words = TRIALS, set(), None, ""
        if before is None and settings.seeds_strategy is not None:   # refused before any trial, not after
            new_design_check(settings.seeds_strategy.design, family_size(rows, settings.baseline))

    def next_jobs(self, sweep) -> list:
        """The cells to launch next (``Launch`` values); [] when the sweep is done."""
        if self.phase == TRIALS:
            batch = self.next_trials(self.launched)
            if batch:
                self.launched.update(t.dirname for _, t in batch)
                self.words = "tune strategy: batch of {} trials"
                return [Launch(f"{row.row} trial={t.number}", t.overrides) for row, t in batch]
            self.phase = SEEDS
            self.tell_finished()
            if self.settings.seeds_strategy is not None:
                self.seeds_planner = self.plan_seeds()
        if self.seeds_planner is not None:
            return self.planned_seeds(sweep)
        if self.phase == SEEDS:
            self.phase = DONE
            self.words = "tune strategy: the best values' seeds, {} cells"
            return [Launch(f"{row.row} seed={seed}", overrides) for row, seed, overrides in self.final_cells()]
        return []

    def batch_words(self, count: int) -> str:
        """How the log introduces a batch of ``count`` cells."""
        return self.words.format(count)

    # --- the trials --------------------------------------------------------------------------------

    def study(self, row: TuneRow, number: int = None):
        sampler = None if number is None else studies.sampler(
            self.settings.sampler_seed, self.row_index[row.row], number, self.settings.startup_trials)
        return studies.open_study(self.sweep_dir, row.study, the_sampler=sampler)

    def trial_cell(self, row: TuneRow, number: int, params: dict) -> Trial:
        values = [override_text(k, v) for k, v in params.items()]
        overrides = row.overrides + values + [f"{SEED}={self.settings.trial_seed}", f"{TRIAL}={number}"]
        return Trial(number, self.name(overrides), overrides, dict(v.split("=", 1) for v in values), study=row.study)

    def tell_finished(self) -> None:
        """Tell each row's study what its trials' cells recorded (ok: its validation loss; pruned;
        failed); a trial whose cell has no outcome yet stays running, to be launched again."""
        for row in self.rows:
            study = self.study(row)
            row.trials = []
            for trial in study.get_trials(deepcopy=False):
                cell = self.trial_cell(row, trial.number, trial.params)
                record = Record.read(self.sweep_dir / cell.dirname)
                if trial.state == TrialState.RUNNING and record is not None:
                    if is_ok(record) and record.valid_loss is not None:
                        study.tell(trial.number, record.valid_loss)
                    elif is_pruned(record):
                        study.tell(trial.number, state=TrialState.PRUNED)
                    elif is_failed(record):  # a trial that fails (a diverging lr) is spent, not retried
                        study.tell(trial.number, state=TrialState.FAIL)
                cell.state = study.get_trials(deepcopy=False)[trial.number].state.name
                cell.value = record.valid_loss if record else None
                cell.error = record.error if record else ""
                row.trials.append(cell)
            done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
            if done:
                best = min(done, key=lambda t: (t.value, t.number))
                row.best = BestTrial(best.number, best.value, self.trial_cell(row, best.number, best.params).values)

    def next_trials(self, launched: set) -> list:
        """``[(row, trial), ...]`` to run next: the trials that never finished (a rerun), then
        new ones asked of each row's study, up to ``batch_trials`` a row and ``trials`` in all."""
        self.tell_finished()
        batch = []
        for row in self.rows:
            running = [t for t in row.trials if t.state == RUNNING and t.dirname not in launched]
            batch += [(row, t) for t in running[:self.settings.batch_trials]]
            for _ in range(self.settings.batch_trials - len(running)):
                number = len(row.trials)
                if number >= self.settings.trials:
                    break
                trial = self.study(row, number).ask(self.distributions)
                if trial.number != number:  # another process asked meanwhile: nothing here is that trial's
                    raise StrategyError(f"{self.sweep_dir / TUNE_FILE}: row {row.row}'s study has trial "
                                        f"{trial.number} where {number} was expected; is another sweeper running?")
                cell = self.trial_cell(row, number, trial.params)
                cell.state = RUNNING
                row.trials.append(cell)
                batch.append((row, cell))
        return batch

    # --- the best values' seeds --------------------------------------------------------------------

    def plan_seeds(self) -> SeedsPlanner:
        """The seeds strategy's planner for the best values' seeds: each row against its baseline row
        (both at their own best values), a look after every batch, until it stops."""
        settings = self.settings.seeds_strategy
        base_key, base_value = parse_baseline(str(settings.baseline))
        self.tuned = [row for row in self.rows if row.best is not None]
        self.planned = {row.row: PlannedRow(SeedsRow(
            row.row, row.overrides + row.best_overrides,
            baseline=str(value_in(row.overrides, base_key)) == str(base_value))) for row in self.tuned}
        grid = {id(self.planned[row.row]): row.overrides for row in self.tuned}  # the rows' own values
        link_baselines(list(self.planned.values()), base_key, base_value, grid=lambda state: grid[id(state)])
        before = None
        if isinstance(self.before, TuneState) and self.before.settings.seeds_strategy:
            before = SeedsState(self.before.settings.seeds_strategy,
                                [r.plan for r in self.before.rows if r.plan is not None], [])
        return SeedsPlanner(settings, list(self.planned.values()), self.name, before)

    def planned_seeds(self, sweep) -> list:
        """The seeds planner's next batch, each tuned row's seeds and plan kept in its ``TuneRow``."""
        batch = self.seeds_planner.next_jobs(sweep)
        for row in self.tuned:
            planned = self.planned[row.row]
            row.seeds, row.plan = sorted(set(planned.state.seeds) | planned.tried), planned.state
        self.words = "tune strategy: the best values' seeds by the seeds strategy, batch of {}"
        return batch

    def final_cells(self) -> list:
        """``[(row, seed, overrides)]``: each row's best values with seeds 1..seeds, where not ok yet."""
        out = []
        for row in self.rows:
            if row.best is None:
                continue
            row.seeds = list(range(1, self.settings.seeds + 1))
            for seed in row.seeds:
                overrides, dirname = self.final_cell(row, seed)
                if not is_ok(Record.read(self.sweep_dir / dirname)):
                    out.append((row, seed, overrides))
        return out

    def final_cell(self, row: TuneRow, seed: int) -> tuple:
        """``(overrides, dirname)`` of the cell that runs a row's best values with ``seed``."""
        overrides = row.overrides + row.best_overrides + [f"{SEED}={seed}"]
        return overrides, self.name(overrides)

    def state(self) -> TuneState:
        """The plan as it stands: every trial's cell, each row's best values and its final cells."""
        cells = [StateCell(*reversed(self.final_cell(row, seed))) for row in self.rows if row.best is not None
                 for seed in row.seeds]
        return TuneState(self.settings, self.space, self.rows, cells)
