"""The cells a sweep planned, recomputed from Hydra's ``multirun.yaml`` with Hydra's own logic
(BasicSweeper's cartesian product, the override_dirname rule), so a cell that never reported can
be named as missing."""

from dataclasses import dataclass
from pathlib import Path

from hydra._internal.config_loader_impl import get_overrides_dirname
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.kinds import grid_skip_reason

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@dataclass(frozen=True)
class PlannedCell:
    dirname: str            # the cell's directory under the sweep directory
    values: dict            # the swept keys and their values in this cell
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
    cells = []
    for job in jobs:
        overrides = parser.parse_overrides(job)
        dirname = get_overrides_dirname(overrides=overrides, exclude_keys=list(naming.exclude_keys),
                                        item_sep=naming.item_sep, kv_sep=naming.kv_sep)
        values = {o.key_or_group: o.value() for o in overrides}
        cells.append(PlannedCell(dirname, values, _skip_reason(cfg, values)))
    return cells


def _skip_reason(cfg, values) -> str:
    if not cfg.get("skip_impossible", False):
        return ""
    model = str(values.get("model", cfg.model.name))
    family = _family(model, cfg)
    pe = str(values.get("pe", cfg.pe))
    placement = str(values.get("placement", cfg.placement))
    return grid_skip_reason(family, pe, placement) or ""


def _family(model_name: str, cfg) -> str:
    if model_name == cfg.model.name:
        return cfg.model.family
    path = CONF_DIR / "model" / f"{model_name}.yaml"
    return OmegaConf.load(path).family if path.exists() else "unknown"
