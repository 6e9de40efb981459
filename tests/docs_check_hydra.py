"""A page's ``posenc-run`` line composed as ``posenc-run --cfg job`` would compose it, in-process
through Hydra's compose API, and checked as the application checks a cell before any work.

Hydra refuses ``--cfg`` with ``-m``, so a sweep is composed once per value of each swept key (the
other swept keys at their first value): every value a page sweeps must compose too."""

import contextlib
import functools

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from posenc.harness.config.spec import cell_spec, check_possible
from posenc.harness.errors import ConfigError
from posenc.harness.presets import experiment_as_override
from project import REPO, compose_cfg, hidden_fairseq_config_store

MULTIRUN = {"-m", "--multirun"}
CONFIG_DIR = {"--config-dir", "-cd"}


def check_posenc_run(args: list[str]) -> str | None:
    words, multirun, cfg, config_dirs = [], False, None, []
    tokens = iter(args)
    for word in tokens:
        if word in MULTIRUN:
            multirun = True
        elif word in ("--cfg", "-c"):
            cfg = next(tokens, "")
        elif word in CONFIG_DIR or word.startswith("--config-dir="):
            # Hydra adds the directory to the search path, as hydra.searchpath=[file://DIR] does.
            where = word.split("=", 1)[1] if "=" in word else next(tokens, "")
            if not (REPO / where).is_dir():
                return f"posenc-run --config-dir {where}: no such directory"
            config_dirs.append(f"file://{(REPO / where).resolve()}")
        elif word.startswith("-"):
            return f"posenc-run: the checks know no flag {word} (only -m / --multirun, --cfg and --config-dir)"
        else:
            words.append(word)
    words = experiment_as_override(words)  # as posenc-run takes it
    if config_dirs:
        words.append(f"hydra.searchpath=[{','.join(config_dirs)}]")
    if cfg not in (None, "job", "hydra", "all"):
        return f"posenc-run --cfg {cfg}: Hydra prints job, hydra or all"
    if cfg and multirun:
        return "posenc-run: Hydra refuses --cfg with -m"
    try:
        overrides = OverridesParser.create().parse_overrides(words)
    except HydraException as err:
        return first_line(err)
    sweeps = [o for o in overrides if o.is_sweep_override()]
    if sweeps and not multirun:
        return f"{sweeps[0].input_line} sweeps over values: it needs -m"
    for line in one_value_per_key(overrides):
        why = composed(tuple(line))
        if why:
            return why
    return None


def one_value_per_key(overrides) -> list[list[str]]:
    """Single-value override lists: the first value of every swept key, then each other value of
    each swept key in turn."""
    values = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
              else [o.input_line] for o in overrides]
    lines = [[v[0] for v in values]]
    for i, options in enumerate(values):
        lines += [[option if j == i else v[0] for j, v in enumerate(values)] for option in options[1:]]
    return lines


@functools.cache
def composed(overrides: tuple[str, ...]) -> str | None:
    """``None`` when the overrides compose and the cell passes the application's own checks
    (``placement``, ``pe`` and the model, as ``posenc-run`` checks them before it trains)."""
    try:
        with hidden_fairseq_config_store():  # fairseq's own schema, if a check imported it, is not ours
            cfg = compose_cfg(*overrides)
    except (HydraException, OmegaConfBaseException) as err:
        return first_line(err)
    try:
        with registry_kept():
            # A grid that skips impossible cells (experiment=pe_grid) checks each value alone, as the app does.
            spec, _ = cell_spec(cfg)
            if not cfg.get("skip_impossible"):
                check_possible(spec, cfg.model.name)
    except ConfigError as err:
        return str(err)
    return None


@contextlib.contextmanager
def registry_kept():
    """The kinds' registry (and the kinds files loaded) as before: a page's kinds_module= is loaded
    for its check only, and no other test of this process sees its kinds."""
    from posenc import kinds
    from posenc.kinds import file as kinds_file
    saved, loaded = dict(kinds._REGISTRY), dict(kinds_file._LOADED)
    try:
        yield
    finally:
        kinds._REGISTRY.clear()
        kinds._REGISTRY.update(saved)
        kinds_file._LOADED.clear()
        kinds_file._LOADED.update(loaded)


def first_line(err: Exception) -> str:
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
