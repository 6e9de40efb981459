"""The cells a sweep planned, recomputed from Hydra's ``multirun.yaml`` with Hydra's own logic
(BasicSweeper's cartesian product of the preset's ``hydra.sweeper.params`` and the command line's
overrides, the command line winning on the same key; the override_dirname rule), so a cell that
never reported can be named as missing. Any sweep form plans: a command-line sweep
(``placement=both,none``), a preset, a preset with more swept keys (``experiment=table4
seed=1,2,3,4``), and keys that need ``+`` (``+model.args.dropout=0.1,0.2``)."""

from dataclasses import dataclass
from pathlib import Path

from hydra._internal.config_loader_impl import get_overrides_dirname
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.kinds import grid_skip_reason
from posenc.report.models import model_family


@dataclass(frozen=True)
class PlannedCell:
    dirname: str            # the cell's directory under the sweep directory
    values: dict            # every override of this cell (swept or fixed) and its value
    skip_reason: str = ""   # non-empty: the sweep leaves this cell out by design


def planned_cells(sweep_dir: Path):
    """Every cell of the sweep in launch order, or None when the sweep has no ``multirun.yaml``."""
    plan_file = Path(sweep_dir) / "multirun.yaml"
    if not plan_file.exists():
        return None
    cfg = OmegaConf.load(plan_file)
    # A sweep typed on the command line has no preset params: its swept keys are in the task overrides.
    preset = cfg.hydra.sweeper.get("params")
    params = OmegaConf.to_container(preset) if preset else {}
    arguments = [f"{k}={v}" for k, v in params.items()] + list(cfg.hydra.overrides.task)
    parser = OverridesParser.create()
    jobs = BasicSweeper.split_arguments(parser.parse_overrides(arguments), None)[0]
    naming = cfg.hydra.job.config.override_dirname
    parsed = {}  # each distinct "key=value" parsed once: a 1,000-cell sweep has a few dozen
    cells = []
    for job in jobs:
        for element in job:
            if element not in parsed:
                parsed[element] = parser.parse_overrides([element])[0]
        overrides = [parsed[element] for element in job]
        dirname = get_overrides_dirname(overrides=overrides, exclude_keys=list(naming.exclude_keys),
                                        item_sep=naming.item_sep, kv_sep=naming.kv_sep)
        values = {o.key_or_group: o.value() for o in overrides}
        cells.append(PlannedCell(dirname, values, _skip_reason(cfg, values)))
    return cells


def override_values(lines) -> dict:
    """``["+model.args.dropout=0.1", "seed=2"]`` -> ``{"model.args.dropout": 0.1, "seed": 2}``."""
    return {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(list(lines))}


def _skip_reason(cfg, values) -> str:
    if not cfg.get("skip_impossible", False):
        return ""
    model = str(values.get("model", cfg.model.name))
    family = cfg.model.family if model == cfg.model.name else model_family(model)
    pe = str(values.get("pe", cfg.pe))
    placement = str(values.get("placement", cfg.placement))
    return grid_skip_reason(family, pe, placement) or ""
