"""What a sweep varies, and a refusal at its start for a swept key that never names a cell's directory
(``posenc.cells.keys.NOT_NAMING``: a path such as ``data.dir``, ``runtime.deterministic``): the cells of
its values would share one directory, each overwriting or taking another's result."""

import sys

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from posenc.cells.keys import NOT_NAMING

NAMED_BY_THEIR_OWN = {"experiment"}  # a preset's own swept keys name its cells


def swept(config) -> dict:
    """``{key: Hydra's Override}`` for the keys the sweep varies: the command line's sweeps and the preset's
    ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = [str(line) for line in config.hydra.overrides.task]
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = [f"{key}={value}" for key, value in params.items()] + task
    overrides = [o for o in OverridesParser.create().parse_overrides(lines) if o.is_sweep_override()]
    return {o.key_or_group: o for o in overrides}


def unnamed_sweep_problem(config) -> str:
    """Why the sweep cannot run as typed (a swept key that names no cell), or ""."""
    for key, override in swept(config).items():
        if key in NOT_NAMING and key not in NAMED_BY_THEIR_OWN:
            return (f"{override.input_line.lstrip('+')} is swept, but {key} never names a cell's directory "
                    "(posenc/cells/keys.py), so its cells would share theirs: run one sweep per value "
                    "(each names its sweep's directory)")
    return ""


class UnnamedSweepCheck(Callback):
    """Hydra's callback in ``posenc-run``'s own process, before the sweeper launches anything."""

    def on_multirun_start(self, config, **kwargs) -> None:
        problem = unnamed_sweep_problem(config)
        if problem:
            print(f"posenc-run: error: {problem}", file=sys.stderr)
            sys.exit(2)
