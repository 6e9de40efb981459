"""Where the project's files beside the code live: the Hydra configs and the papers' reference
numbers. In a clone (an editable install) they are the repository's own ``conf/`` and
``results/reference/``; an installed wheel carries them as package data, ``posenc/conf`` and
``posenc/reference`` (setup.py maps them there, so git keeps one copy). The clone is asked first,
so an edit to ``conf/`` in a clone is what ``posenc-run`` composes. Absolute paths: they work from
any directory."""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def clone_root(package: Path = PACKAGE):
    """The repository this package was imported from (its ``pyproject.toml`` and ``conf/`` beside
    the package), or None for an installed package (``site-packages`` has neither)."""
    root = package.parent
    if (root / "pyproject.toml").is_file() and (root / "conf" / "config.yaml").is_file():
        return root
    return None


CLONE = clone_root()
CONF_DIR = CLONE / "conf" if CLONE else PACKAGE / "conf"
REFERENCE_DIR = CLONE / "results" / "reference" if CLONE else PACKAGE / "reference"
