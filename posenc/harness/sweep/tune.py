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

The planner, with no Hydra in it, is ``posenc.harness.sweep.tune_planner``; this module is the
Hydra side only (the grid, each search-space key checked against the cell's config as Hydra
composes it, the launches, through ``LaunchingSweeper.drive`` as the seeds sweeper's).

State, in the sweep directory: the studies (``posenc.cells.strategy.STUDY_FILE``, Optuna's journal
file) and ``posenc.cells.strategy.TuneState`` (every trial's cell, each row's best values and its
final cells: the sweep's plan for every reader), written before each batch is launched. A rerun of the same command
tells the studies what finished, relaunches the trials that never did (their cells resume) and goes
on; no finished trial or cell runs again.
"""

import logging
import sys
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.cells.plan import PLAN_FILE, sweep_jobs
from posenc.cells.strategy import StateError, TuneRow, TuneSettings, TuneState, read_state
from posenc.harness.sweep.launching import LaunchingSweeper
from posenc.harness.sweep.planner import SEED, StrategyError, row_label
from posenc.harness.sweep.seeds import cell_namer
from posenc.harness.sweep.tune_planner import TRIAL, TunePlanner, checked, override_text, space_distributions

log = logging.getLogger(__name__)
__all__ = ["TuneSweeper", "override_text", "space_distributions"]


def plain(value):
    """A config node as plain values (Hydra passes dicts as DictConfig)."""
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


class TuneSweeper(LaunchingSweeper):
    def __init__(self, params, search_space, **settings):
        # Hydra passes every field of the structured config: TuneSettings' own (its defaults), plain here.
        self.params = dict(params or {})
        self.space = dict(plain(search_space) or {})
        self.settings = TuneSettings(**{name: plain(value) for name, value in settings.items()})

    def sweep(self, arguments):
        try:
            return self.run(arguments)
        except (StrategyError, StateError) as err:  # settings it cannot run (nothing started), or a moved study
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)

    def run(self, arguments):
        settings = checked(self.settings)
        distributions = space_distributions(self.space)
        rows = self.rows(arguments, distributions)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        before = read_state(sweep_dir) if sweep_dir.exists() else None
        if before is not None and not isinstance(before, TuneState):
            raise StrategyError(f"{sweep_dir}: a seeds strategy's sweep; allowed: a new hydra.sweep.dir")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / PLAN_FILE)
        planner = TunePlanner(settings, rows, self.space, sweep_dir, cell_namer(self.config), before)
        return self.drive(planner, sweep_dir)

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
                     f"{self.settings.trial_seed} for the trials and seeds 1..{self.settings.seeds} "
                     "for each row's best values")
        jobs = sweep_jobs(parser.parse_overrides(preset + list(arguments)))
        grid = {line.split("=", 1)[0].lstrip("+~") for job in jobs for line in job}
        for key in distributions:
            if key.lstrip("+~") in grid:
                raise StrategyError(f"hydra.sweeper.search_space.{key}: the grid sets {key.lstrip('+~')} too; "
                                    "allowed: a key the command line and the preset leave alone")
        rows = [TuneRow(row_label(job, jobs), list(job)) for job in jobs]
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
