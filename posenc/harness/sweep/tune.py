"""``hydra/sweeper=posenc_tune``: each row of the table tunes its own values (learning rate, warmup,
dropout, ...) by an Optuna study, then runs its seeds with the values its study chose.

The rows are the sweep's grid (as the seeds strategy reads it). Every row has an Optuna study of its
own (``posenc.harness.study``: TPE, seeded per trial, so a rerun proposes the same values; an
optional median or ASHA pruner on each epoch's validation loss). A trial is an ordinary cell
(``...,trial=N``) with the proposed values as overrides; it trains and validates, its objective is
its validation loss, and it never scores the test split. Batches of trials (``batch_trials`` per
row, every row's together) go through whatever launcher is configured. After ``trials`` trials per
row, each row's best values run ``seeds`` seeds (1..seeds: seeds no trial trained with), or as many
as the seeds strategy plans (``seeds_strategy``: its settings; the same rule and planner), scored on
test as any cell: the table of the sweep is theirs.

Why not hydra-optuna-sweeper: it runs one study for the whole sweep (one objective over every
job), it pins optuna<3, and it has no storage that several SLURM jobs can share; a row's study of
its own is what "each placement's learning rate tuned" means.

State, in the sweep directory: the studies (``posenc.cells.strategy.STUDY_FILE``, Optuna's journal
file) and ``posenc.cells.strategy.TuneState`` (every trial's cell, each row's best values and its
final cells: the sweep's plan for every reader), written before each batch is launched. A rerun of the same command
tells the studies what finished, relaunches the trials that never did (their cells resume) and goes
on; no finished trial or cell runs again.
"""

import logging
import sys
import time
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from posenc.cells.plan import PLAN_FILE, override_dirname, sweep_jobs
from posenc.cells.record import Record, is_failed, is_ok, is_pruned
from posenc.cells.strategy import (
    TUNE_FILE,
    SeedsRow,
    SeedsState,
    StateCell,
    StateError,
    Trial,
    TuneRow,
    TuneState,
    read_state,
    write_state,
)
from posenc.cells.sweep import read_sweep
from posenc.harness import study as studies
from posenc.harness.run.signals import STOP
from posenc.harness.sweep.config import SEEDS_SETTINGS
from posenc.harness.sweep.launching import LaunchingSweeper
from posenc.harness.sweep.planner import SEED, Row, SeedsPlanner, StrategyError, link_baselines, row_label, value_in
from posenc.harness.sweep.seeds import checked_settings
from posenc.report.rows import parse_baseline

log = logging.getLogger(__name__)
TRIAL = "trial"
SPEC_KEYS = {"type", "low", "high", "log", "choices"}
TYPES = ("float", "int", "categorical")
RUNNING = TrialState.RUNNING.name  # a trial's state in the strategy's state is Optuna's name for it


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


class TuneSweeper(LaunchingSweeper):
    def __init__(self, params, search_space, trials, batch_trials, startup_trials, sampler_seed, pruner,
                 prune_from_epoch, pruner_startup_trials, trial_seed, seeds, baseline, seeds_strategy):
        # No defaults here: Hydra passes every field of the structured config (posenc.harness.sweep.config).
        self.params = dict(params or {})
        self.space = OmegaConf.to_container(search_space) if OmegaConf.is_config(search_space) \
            else dict(search_space or {})
        self.counts = {"trials": trials, "batch_trials": batch_trials, "startup_trials": startup_trials,
                       "prune_from_epoch": prune_from_epoch, "pruner_startup_trials": pruner_startup_trials,
                       "seeds": seeds}
        self.sampler_seed, self.trial_seed, self.pruner_name, self.baseline = sampler_seed, trial_seed, pruner, baseline
        # The best values' seeds sized by the seeds strategy's design instead of a fixed count: its settings.
        self.seeds_strategy = OmegaConf.to_container(seeds_strategy) if OmegaConf.is_config(seeds_strategy) \
            else seeds_strategy

    def sweep(self, arguments):
        try:
            return self.run(arguments)
        except (StrategyError, StateError) as err:  # settings it cannot run (nothing started), or a moved study
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)

    def run(self, arguments):
        distributions = self.check_settings()
        rows = self.rows(arguments, distributions)
        self.sweep_dir = Path(self.config.hydra.sweep.dir)
        self.before = read_state(self.sweep_dir) if self.sweep_dir.exists() else None
        if self.before is not None and not isinstance(self.before, TuneState):
            raise StrategyError(f"{self.sweep_dir}: a seeds strategy's sweep; allowed: a new hydra.sweep.dir")
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, self.sweep_dir / PLAN_FILE)
        self.parser = OverridesParser.create()
        self.naming = self.config.hydra.job.config.override_dirname
        returns, launched = [], set()
        while not STOP.requested:  # the trials, a batch at a time
            started = time.perf_counter()
            batch = self.next_trials(rows, distributions, launched)
            self.write_state(rows)  # the state names the batch before it runs
            if not batch:
                break
            log.info(f"tune strategy: batch of {len(batch)} trials (decided in {time.perf_counter() - started:.2f} s): "
                     + "; ".join(f"{row.row} trial={t.number}" for row, t in batch))
            launched.update(t.dirname for _, t in batch)
            returns.append(self.launch([t.overrides for _, t in batch]))
        if not STOP.requested and self.seeds_strategy is not None:
            self.tell_finished(rows)
            returns += self.seeds_by_plan(rows)
        elif not STOP.requested:
            self.tell_finished(rows)
            finals = self.final_cells(rows)
            self.write_state(rows)
            if finals:
                log.info(f"tune strategy: the best values' seeds, {len(finals)} cells: "
                         + "; ".join(f"{row.row} seed={seed}" for row, seed, _ in finals))
                returns.append(self.launch([overrides for _, _, overrides in finals]))
        return returns

    # --- what the strategy is asked ----------------------------------------------------------------

    def check_settings(self) -> dict:
        for name, value in self.counts.items():
            low = 0 if name in ("startup_trials", "prune_from_epoch", "pruner_startup_trials") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise StrategyError(f"hydra.sweeper.{name}={value!r} is not allowed; allowed: a whole number >= {low}")
        for name, value in (("sampler_seed", self.sampler_seed), ("trial_seed", self.trial_seed)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise StrategyError(f"hydra.sweeper.{name}={value!r} is not allowed; allowed: a whole number >= 0")
        if self.pruner_name is not None and self.pruner_name not in studies.PRUNERS:
            raise StrategyError(f"hydra.sweeper.pruner={self.pruner_name!r} is not allowed; allowed: null, "
                                + ", ".join(studies.PRUNERS))
        if self.seeds_strategy is not None:
            self.planner_settings()  # its own refusals, named hydra.sweeper.<key> as the seeds strategy names them
        try:
            parse_baseline(str(self.baseline))
        except ValueError as err:
            raise StrategyError(f"hydra.sweeper.baseline: {err}") from None
        return space_distributions(self.space)

    def rows(self, arguments, distributions) -> list:
        """The grid's rows; each row's config must take every search-space key (Hydra composes it
        as the launcher will)."""
        parser = OverridesParser.create()
        given = parser.parse_overrides(list(arguments))
        for override in given:
            if override.get_key_element() in (SEED, TRIAL):
                raise StrategyError(f"{override.input_line}: the tune strategy sets {override.get_key_element()} "
                                    "itself; allowed: hydra.sweeper.trial_seed and hydra.sweeper.seeds")
        preset = [f"{k}={v}" for k, v in self.params.items() if k not in (SEED, TRIAL)]
        if SEED in self.params:
            log.info(f"tune strategy: the preset's seed={self.params[SEED]} is replaced by trial_seed="
                     f"{self.trial_seed} for the trials and seeds 1..{self.counts['seeds']} for each row's best values")
        jobs = sweep_jobs(parser.parse_overrides(preset + list(arguments)))
        grid = {line.split("=", 1)[0].lstrip("+~") for job in jobs for line in job}
        for key in distributions:
            if key.lstrip("+~") in grid:
                raise StrategyError(f"hydra.sweeper.search_space.{key}: the grid sets {key.lstrip('+~')} too; "
                                    "allowed: a key the command line and the preset leave alone")
        rows = [TuneRow(row_label(job, jobs), list(job)) for job in jobs]
        self.row_index = {row.row: index for index, row in enumerate(rows)}  # seeds each row's sampler
        for key, dist in distributions.items():  # each key exists (or is added with +) in every row's config
            for row in rows:
                probe = row.overrides + [override_text(key, dist.low if hasattr(dist, "low") else dist.choices[0])]
                try:
                    self.hydra_context.config_loader.load_sweep_config(self.config, probe)
                except Exception as err:  # noqa: BLE001 -- Hydra's own message says what is wrong with the key
                    first = (str(err).strip().splitlines() or [type(err).__name__])[0].rstrip(".")
                    raise StrategyError(f"hydra.sweeper.search_space.{key}: {first} (row {row.row}); allowed: a "
                                        "key of the cell's config, or +key for a new one (e.g. +model.args.dropout)"
                                        ) from None
        return rows

    # --- the trials --------------------------------------------------------------------------------

    def study(self, row: TuneRow, number: int = None):
        sampler = None if number is None else studies.sampler(
            self.sampler_seed, self.row_index[row.row], number, self.counts["startup_trials"])
        return studies.open_study(self.sweep_dir, row.study, the_sampler=sampler)

    def trial_cell(self, row: TuneRow, number: int, params: dict) -> Trial:
        values = [override_text(k, v) for k, v in params.items()]
        overrides = row.overrides + values + [f"{SEED}={self.trial_seed}", f"{TRIAL}={number}"]
        dirname = override_dirname(self.parser.parse_overrides(overrides), self.naming)
        return Trial(number, dirname, overrides, dict(v.split("=", 1) for v in values), study=row.study)

    def tell_finished(self, rows) -> None:
        """Tell each row's study what its trials' cells recorded (ok: its validation loss; pruned;
        failed); a trial whose cell has no outcome yet stays running, to be launched again."""
        for row in rows:
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
                row.best = {"number": best.number, "value": best.value,
                            "values": self.trial_cell(row, best.number, best.params).values}

    def next_trials(self, rows, distributions, launched: set) -> list:
        """``[(row, trial), ...]`` to run next: the trials that never finished (a rerun), then
        new ones asked of each row's study, up to ``batch_trials`` a row and ``trials`` in all."""
        self.tell_finished(rows)
        batch = []
        for row in rows:
            running = [t for t in row.trials if t.state == RUNNING and t.dirname not in launched]
            batch += [(row, t) for t in running[:self.counts["batch_trials"]]]
            for _ in range(self.counts["batch_trials"] - len(running)):
                number = len(row.trials)
                if number >= self.counts["trials"]:
                    break
                trial = self.study(row, number).ask(distributions)
                if trial.number != number:  # another process asked meanwhile: nothing here is that trial's
                    raise StrategyError(f"{self.sweep_dir / TUNE_FILE}: row {row.row}'s study has trial "
                                        f"{trial.number} where {number} was expected; is another sweeper running?")
                cell = self.trial_cell(row, number, trial.params)
                cell.state = RUNNING
                row.trials.append(cell)
                batch.append((row, cell))
        return batch

    # --- the best values' seeds --------------------------------------------------------------------

    def planner_settings(self):
        """The seeds strategy's settings that size the best values' seeds (``seeds_strategy``), checked."""
        settings = self.seeds_strategy
        allowed = set(SEEDS_SETTINGS) - {"baseline"}
        if not isinstance(settings, dict) or set(settings) - allowed:
            unknown = sorted(set(settings) - allowed) if isinstance(settings, dict) else [repr(settings)]
            raise StrategyError(f"hydra.sweeper.seeds_strategy: {unknown[0]} is not a setting of the seeds strategy; "
                                f"allowed: null or a dict of {', '.join(sorted(allowed))}")
        return checked_settings({**settings, "baseline": self.baseline})

    def seeds_by_plan(self, rows) -> list:
        """The best values' seeds, batch by batch, as the seeds strategy's design decides them: each
        row against its baseline row (both at their own best values), a look after every batch, until
        it stops. Returns the launcher's results."""
        settings = self.planner_settings()
        base_key, base_value = parse_baseline(str(settings.baseline))
        tuned = [row for row in rows if row.best is not None]
        states = {row.row: Row(SeedsRow(row.row, row.overrides + row.best_overrides,
                                        baseline=str(value_in(row.overrides, base_key)) == str(base_value)))
                  for row in tuned}
        grid = {id(states[row.row]): row.overrides for row in tuned}  # the rows' own values, not what each tuned
        link_baselines(list(states.values()), base_key, base_value, grid=lambda state: grid[id(state)])
        before = None
        if isinstance(self.before, TuneState) and self.before.settings.get("seeds_strategy"):
            before = SeedsState(self.before.settings["seeds_strategy"],
                                [r.plan for r in self.before.rows if r.plan is not None], [])
        planner = SeedsPlanner(settings, list(states.values()), self.name, before)
        returns = []
        while not STOP.requested:
            batch = planner.next_batch(read_sweep(self.sweep_dir))
            for row in tuned:
                state = states[row.row]
                row.seeds, row.plan = sorted(set(state.state.seeds) | state.tried), state.state
            self.write_state(rows)
            if not batch:
                break
            log.info(f"tune strategy: the best values' seeds by the seeds strategy, batch of {len(batch)}: "
                     + "; ".join(f"{state.label} seed={seed}" for state, seed in batch))
            returns.append(self.launch([state.overrides + [f"{SEED}={seed}"] for state, seed in batch]))
        return returns

    def final_cells(self, rows) -> list:
        """``[(row, seed, overrides)]``: each row's best values with seeds 1..seeds, where not ok yet."""
        out = []
        for row in rows:
            if row.best is None:
                continue
            row.seeds = list(range(1, self.counts["seeds"] + 1))
            for seed in row.seeds:
                overrides, dirname = self.final_cell(row, seed)
                if not is_ok(Record.read(self.sweep_dir / dirname)):
                    out.append((row, seed, overrides))
        return out

    def final_cell(self, row: TuneRow, seed: int) -> tuple:
        """``(overrides, dirname)`` of the cell that runs a row's best values with ``seed``."""
        overrides = row.overrides + row.best_overrides + [f"{SEED}={seed}"]
        return overrides, self.name(overrides)

    def name(self, overrides) -> str:
        return override_dirname(self.parser.parse_overrides(overrides), self.naming)

    def write_state(self, rows) -> None:
        cells = [StateCell(*reversed(self.final_cell(row, seed))) for row in rows if row.best is not None
                 for seed in row.seeds]
        seeds_strategy = None if self.seeds_strategy is None else self.planner_settings().as_state()
        write_state(self.sweep_dir, TuneState(
            {**self.counts, "sampler_seed": self.sampler_seed, "trial_seed": self.trial_seed,
             "pruner": self.pruner_name, "baseline": str(self.baseline), "seeds_strategy": seeds_strategy},
            self.space, rows, cells))
