"""Your own presets beside the packaged ones: a directory with ``experiment/``, ``data/``,
``model/`` ... added with ``--config-dir DIR`` or ``hydra.searchpath=[file://DIR]`` extends the
packaged groups (docs/own-data.md, "Your own presets"). Hydra reads the packaged configs first, so a
file of yours with the name of a packaged one (``experiment/table4.yaml``) is never used; this
callback says so in one line on stderr when the run starts, instead of running the packaged preset
in silence."""

import sys
from pathlib import Path

from hydra.experimental.callback import Callback

from posenc.confdir import CONF_DIR

# Config sources a user adds: --config-dir, and hydra.searchpath from the command line or a config.
USER_PROVIDERS = ("command-line", "hydra.searchpath in command-line", "hydra.searchpath in main")


def hidden_presets(config_sources, conf_dir: Path = CONF_DIR) -> list:
    """``[(name, directory)]``: each preset of a user's config directory (``experiment/table4``)
    that a packaged config of the same name hides."""
    hidden = []
    for source in config_sources:
        if source.schema != "file" or source.provider not in USER_PROVIDERS:
            continue
        root = Path(source.path)
        if not root.is_dir() or root.resolve() == conf_dir.resolve():
            continue
        for path in sorted(root.rglob("*.yaml")):
            name = path.relative_to(root).with_suffix("").as_posix()
            if (conf_dir / f"{name}.yaml").is_file():
                hidden.append((name, str(root)))
    return hidden


def warning(hidden) -> str:
    names = "; ".join(f"{name} ({where})" for name, where in hidden)
    return (f"posenc-run: warning: the packaged preset wins over yours of the same name, so yours is never used: "
            f"{names}; rename yours (e.g. my_{hidden[0][0].rsplit('/', 1)[-1]}) and pick it by that name")


def experiment_as_override(argv: list) -> list:
    """``+experiment=NAME`` as ``experiment=NAME``: the root config lists ``experiment`` (default
    null), where Hydra's append (``+``) finds a value already and refuses, yet ``+experiment=NAME``
    is how Hydra's own docs pick an experiment, so both forms pick a preset (packaged or yours)."""
    return [word[1:] if word.startswith("+experiment=") else word for word in argv]


class UserPresets(Callback):
    """Hydra's callback when a run or a sweep starts: one warning line for hidden presets."""

    def on_run_start(self, config, **kwargs) -> None:
        self._check(config)

    def on_multirun_start(self, config, **kwargs) -> None:
        self._check(config)

    @staticmethod
    def _check(config) -> None:
        hidden = hidden_presets(config.hydra.runtime.config_sources)
        if hidden:
            print(warning(hidden), file=sys.stderr, flush=True)
