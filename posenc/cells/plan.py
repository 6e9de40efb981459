"""The cells a sweep planned, recomputed from Hydra's ``multirun.yaml``, so a cell that never
reported can be named as missing. Any sweep form plans: a command-line sweep
(``placement=both,none``), a preset, a preset with more swept keys (``experiment=table4
seed=1,2,3,4``), and keys that need ``+`` (``+model.args.dropout=0.1,0.2``).

Hydra's public override parser reads the overrides; the two rules Hydra applies to them have no
public API and are restated here, each as Hydra 1.3 states it: BasicSweeper's cartesian product
(the preset's ``hydra.sweeper.params`` then the command line's overrides, a later value of a key
replacing an earlier one in its place) and ``override_dirname`` (the excluded keys dropped, the
rest's input lines sorted, joined with ``item_sep``, ``=`` replaced by ``kv_sep``).
``tests/test_report_e2e.py`` holds both to the directories real sweeps made.
"""

import itertools
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from posenc.cells.keys import register_resolver
from posenc.cells.naming import one_folder
from posenc.cells.record import config_family
from posenc.cells.strategy import read_state
from posenc.kinds import grid_skip_reason

PLAN_FILE = "multirun.yaml"


@dataclass(frozen=True)
class PlannedCell:
    dirname: str            # the cell's directory under the sweep directory
    values: dict            # every override of this cell (swept or fixed) and its value
    skip_reason: str = ""   # non-empty: the sweep leaves this cell out by design


def planned_cells(sweep_dir: Path):
    """Every cell of the sweep in launch order, or None when the sweep has no ``multirun.yaml``.
    An adaptive sweep's plan is the cells it launched so far (its state, ``posenc.cells.strategy``)."""
    plan_file = Path(sweep_dir) / PLAN_FILE
    if not plan_file.exists():
        return None
    state = read_state(sweep_dir)
    if state is not None:
        return [PlannedCell(c.dirname, override_values(c.overrides)) for c in state.cells]
    # Hydra's override parser only for a plan of Hydra's basic sweeper: the adaptive sweepers' planners
    # read a sweep through here and have no Hydra in them (tests/test_tune.py).
    from hydra.core.override_parser.overrides_parser import OverridesParser

    register_resolver()  # the plan's exclude_keys name ${posenc_keys:not_naming}
    cfg = OmegaConf.load(plan_file)
    # A sweep typed on the command line has no preset params: its swept keys are in the task overrides.
    preset = cfg.hydra.sweeper.get("params")
    params = OmegaConf.to_container(preset) if preset else {}
    arguments = [f"{k}={v}" for k, v in params.items()] + list(cfg.hydra.overrides.task)
    parser = OverridesParser.create()
    naming = cfg.hydra.job.config.override_dirname
    exclude = set(naming.exclude_keys)
    parsed = {}  # each distinct "key=value" parsed once: a 1,000-cell sweep has a few dozen
    cells = []
    for job in sweep_jobs(parser.parse_overrides(arguments)):
        for element in job:
            if element not in parsed:
                parsed[element] = parser.parse_overrides([element])[0]
        overrides = [parsed[element] for element in job]
        values = {o.key_or_group: o.value() for o in overrides}
        cells.append(PlannedCell(override_dirname(overrides, naming, exclude), values, _skip_reason(cfg, values)))
    return cells


def override_dirname(overrides, naming, exclude=None) -> str:
    """A cell's directory name from its parsed overrides, by Hydra's ``override_dirname`` rule (a
    slash then made ``_``, as ``hydra.sweep.subdir`` makes it: ``posenc.cells.naming.one_folder``);
    ``naming``: the sweep's ``hydra.job.config.override_dirname`` (``exclude_keys``, ``item_sep``,
    ``kv_sep``)."""
    if exclude is None:
        register_resolver()  # a sweep's exclude_keys name ${posenc_keys:not_naming}
        exclude = set(naming.exclude_keys)
    lines = sorted(o.input_line for o in overrides if o.key_or_group not in exclude)
    return one_folder(naming.item_sep.join(lines).replace("=", naming.kv_sep))  # as conf/config.yaml's subdir


def sweep_jobs(overrides) -> list:
    """BasicSweeper's jobs: each job's ``key=value`` strings, the cartesian product of the swept
    keys in the order the keys first appear (a later override of a key replaces its values)."""
    choices = {}
    for override in overrides:
        key = override.get_key_element()
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                raise ValueError(f"{key}: only a list of values can be swept here (got {override.input_line})")
            choices[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            choices[key] = [f"{key}={override.get_value_element_as_str() or ''}"]
    return [list(job) for job in itertools.product(*choices.values())]


def override_values(lines) -> dict:
    """``["+model.args.dropout=0.1", "seed=2"]`` -> ``{"model.args.dropout": 0.1, "seed": 2}``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # imported late: see planned_cells

    return {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(list(lines))}


def _skip_reason(cfg, values) -> str:
    if not cfg.get("skip_impossible", False):
        return ""
    model = str(values.get("model", cfg.model.name))
    family = cfg.model.family if model == cfg.model.name else config_family(model)
    pe = str(values.get("pe", cfg.pe))
    placement = str(values.get("placement", cfg.placement))
    return grid_skip_reason(family, pe, placement) or ""
