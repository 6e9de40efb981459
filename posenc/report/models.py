"""A model config's family (``fconv`` or ``transformer``), read from its ``conf/model/<name>.yaml``."""

from functools import cache
from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@cache
def model_family(model_name: str) -> str:
    """``"fconv"``, ``"transformer"``, or ``"unknown"`` for a name with no config."""
    path = CONF_DIR / "model" / f"{model_name}.yaml"
    if not path.is_file():
        return "unknown"
    return str(OmegaConf.load(path).get("family", "unknown"))
