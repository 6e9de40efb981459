"""The adaptive sweepers' settings and their defaults, in one place: the structured configs that
``hydra_plugins/posenc_sweeper`` stores in Hydra's ConfigStore (``posenc_seeds_schema``
and ``posenc_tune_schema``, outside the ``hydra/sweeper`` group so that no help lists them as choices). The YAML presets
(conf/hydra/sweeper/posenc_seeds.yaml, posenc_tune.yaml) only select these and say what each
setting means. No Hydra here: the planner reads the defaults too.

The seeds strategy's design settings (alpha, pilot_seeds, max_seeds, spending, gamma, futility,
futility_from) are ``posenc.stats.sequential.Design``'s fields with Design's own defaults; the
strategy adds the planned effect, the test size it plans for, the baseline and the batch size.
Every field is typed ``Any``: the strategy checks each value itself and refuses a bad one in one
line naming it (OmegaConf's own type errors are tracebacks).

The tune strategy's settings are ``posenc.cells.strategy.TuneSettings``' fields with its defaults:
its state keeps the same type, so they are defined there, once, below the harness.
"""

from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any

from posenc.cells.rows import BASELINE
from posenc.cells.strategy import TuneSettings
from posenc.stats.power import DEFAULT_EFFECT
from posenc.stats.sequential import Design

SEEDS_TARGET = "hydra_plugins.posenc_sweeper.seeds.SeedsSweeper"
TUNE_TARGET = "hydra_plugins.posenc_sweeper.tune.TuneSweeper"


@dataclass
class SeedsPlanConf:
    """What the seeds strategy adds to the design."""
    effect: Any = DEFAULT_EFFECT   # the |Δ| in BLEU each row is planned to find (futility's conditional power)
    test_size: Any = None          # plan for this many test sentences (None: the sweep's own test set)
    baseline: Any = BASELINE
    batch_seeds: Any = 1           # seeds a going row gets between two looks (launch capacity, never Δ): 1 is
    #                                the design its thresholds are computed for (a look at every n)


def _fields_of(settings) -> list:
    """A settings dataclass's fields as a structured config's: each ``Any``, with its default."""
    out = []
    for f in fields(settings):
        default = f.default if f.default is not MISSING else f.default_factory()
        out.append((f.name, Any, field(default=default)))
    return out


# The seeds strategy's settings: Design's fields (with Design's defaults) and SeedsPlanConf's.
SeedsStrategyConf = make_dataclass("SeedsStrategyConf", _fields_of(Design), bases=(SeedsPlanConf,))
SeedsSweeperConf = make_dataclass("SeedsSweeperConf", [
    ("_target_", str, field(default=SEEDS_TARGET)),
    ("params", Any, field(default=None)),    # the grid of rows (a preset's seed list is replaced)
    ("min_seeds", Any, field(default=None)),  # the replaced rule's floor: kept only to refuse it in one line
    # true: a new sweep takes the cells already in its directory (no state yet) into its first look,
    # as the user says; recorded in the state and the table. false: such a directory is refused.
    ("adopt", Any, field(default=False)),
], bases=(SeedsStrategyConf,))
SEEDS_SETTINGS = tuple(f.name for f in fields(SeedsStrategyConf))


# The tune strategy's settings: TuneSettings' fields (with its defaults) beside the grid and the search space.
TuneSweeperConf = make_dataclass("TuneSweeperConf", [
    ("_target_", str, field(default=TUNE_TARGET)),
    ("params", Any, field(default=None)),         # the grid of rows
    ("search_space", Any, field(default=None)),   # key -> {low, high, type, log} or {choices: [...]}
    *_fields_of(TuneSettings),
])


def seeds_settings(given: dict) -> dict:
    """The seeds strategy's settings: ``given`` over the defaults (unknown keys left to the caller)."""
    defaults = {f.name: (f.default if f.default is not MISSING else f.default_factory())
                for f in fields(SeedsStrategyConf)}
    return {**defaults, **{k: v for k, v in given.items() if k in defaults}}

