"""Where the project's Hydra configs live: ``conf/`` at the repo root (an editable install), so an
absolute path works from any directory."""

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
