"""``hydra/sweeper=posenc_seeds``: a group sequential sweep over seeds. The Hydra side only: it
reads the grid as Hydra's basic sweeper does, names cells by Hydra's ``override_dirname``, and
launches what the planner (``posenc.harness.sweep.planner``, no Hydra in it) asks for, batch by
batch, through whatever launcher is configured (``LaunchingSweeper.drive``, the loop the tune
sweeper drives its planner with too); as hydra-optuna-sweeper splits ``OptunaSweeper``
from ``OptunaSweeperImpl``. Its settings and their defaults: ``posenc.harness.sweep.config``.

Every job is an ordinary cell (its directory ``...,seed=N``, record, hashes, resume, W&B run). The
state (``posenc.cells.strategy.SeedsState``) is written before each batch is launched. A rerun of
the same command reads the state and the records again, takes no look twice, decides the same way
and launches only cells that are not finished (a cell in flight when the sweeper was killed
resumes from its checkpoint; the per-cell lock keeps two runs off one cell).
"""

import logging
import sys
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.cells.plan import PLAN_FILE, override_dirname, sweep_jobs
from posenc.cells.strategy import SEEDS_FILE, SeedsState, StateError, read_state
from posenc.cells.sweep import reported_cells
from posenc.harness.sweep.config import SEEDS_SETTINGS
from posenc.harness.sweep.launching import LaunchingSweeper
from posenc.harness.sweep.planner import SEED, SeedsPlanner, StrategyError, checked_settings

log = logging.getLogger(__name__)


def cell_namer(config):
    """``name(overrides) -> dirname`` by the sweep's ``hydra.job.config.override_dirname``."""
    parser, naming = OverridesParser.create(), config.hydra.job.config.override_dirname
    return lambda overrides: override_dirname(parser.parse_overrides(overrides), naming)


def grid_jobs(params: dict, arguments, strategy: str) -> list:
    """The grid's jobs without seed (the preset's ``params`` and the command line, as Hydra's basic
    sweeper reads them); a seed on the command line is refused."""
    parser = OverridesParser.create()
    swept_here = [o for o in parser.parse_overrides(list(arguments)) if o.get_key_element() == SEED]
    if swept_here:
        raise StrategyError(f"{swept_here[0].input_line}: the {strategy} strategy chooses the seeds itself; "
                            "allowed: no seed on the command line (set hydra.sweeper.pilot_seeds, max_seeds)")
    preset = [f"{k}={v}" for k, v in params.items() if k != SEED]
    if SEED in params:
        log.info(f"{strategy} strategy: the preset's seed={params[SEED]} is replaced by the seeds its design asks for")
    return sweep_jobs(parser.parse_overrides(preset + list(arguments)))


def found_cells(sweep_dir: Path, adopt, before: SeedsState = None) -> list:
    """The cells a sweep directory holds that its seeds state ``before`` never launched or adopted
    (every cell, where it has no state), which the next look would take as found: the design's
    first look all at once, or a later one without the state knowing. Refused unless ``adopt`` is
    true, and then returned for the state to record."""
    if adopt not in (True, False):
        raise StrategyError(f"hydra.sweeper.adopt={adopt!r} is not allowed; allowed: true or false")
    known = set() if before is None else {c.dirname for c in before.cells} | set(before.adopted)
    found = [name for name in reported_cells(sweep_dir) if name not in known]
    if not found or adopt:
        return found
    if before is None:
        raise StrategyError(f"{sweep_dir} holds {len(found)} cells (e.g. {found[0]}) but no {SEEDS_FILE}: the "
                            "design's first look would take them all at once; allowed: a new hydra.sweep.dir, or "
                            "hydra.sweeper.adopt=true to adopt them (the state and the table say so)")
    raise StrategyError(f"{sweep_dir} holds {len(found)} cells that its {SEEDS_FILE} never launched (e.g. {found[0]}): "
                        "its next look would take them unrecorded; allowed: move them out, or hydra.sweeper.adopt=true "
                        "to adopt them (the state and the table say so)")


class SeedsSweeper(LaunchingSweeper):
    def __init__(self, params=None, min_seeds=None, adopt=False, **settings):
        self.params = dict(params or {})
        self.given = {k: v for k, v in settings.items() if k in SEEDS_SETTINGS}
        self.min_seeds, self.adopt = min_seeds, adopt

    def sweep(self, arguments):
        try:
            if self.min_seeds is not None:
                raise StrategyError(f"hydra.sweeper.min_seeds={self.min_seeds} was the replaced rule's floor; the "
                                    "group sequential design holds its level by its thresholds and needs none; "
                                    "allowed: leave it out (hydra.sweeper.max_seeds, futility_from)")
            settings = checked_settings(self.given)
            sweep_dir = Path(self.config.hydra.sweep.dir)
            before = read_state(sweep_dir) if sweep_dir.exists() else None
            if before is not None and not isinstance(before, SeedsState):
                raise StrategyError(f"{sweep_dir}: a tune strategy's sweep; allowed: a new hydra.sweep.dir")
            found = found_cells(sweep_dir, self.adopt, before)
            planner = SeedsPlanner.for_grid(settings, grid_jobs(self.params, arguments, "seeds"),
                                            cell_namer(self.config), before)
            planner.adopted = list(dict.fromkeys([*planner.adopted, *found]))
        except (StrategyError, StateError) as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / PLAN_FILE)
        return self.drive(planner, sweep_dir)
