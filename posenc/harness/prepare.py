"""``posenc-prepare [-m] [overrides]``: prepare and cache the corpora a run (or, with ``-m``, every cell of
the sweep) of ``posenc-run`` with the same overrides would use, and train nothing; then say where each is.

On a cluster the first cells of an array would otherwise tokenize a corpus and learn its subwords while
the others wait on its lock (docs/clusters.md): prepared once beforehand, every cell finds it in the
cache. Each cell's config is composed as posenc-run composes it (the same presets, the same sweep
expansion as the plan's, ``posenc.cells.plan.sweep_jobs``) and its corpus prepared by the one function
a cell prepares it with (``posenc.corpora.prepare_corpus``), into the cache the cell reads
(``paths.cache_dir``: ``$POSENC_CACHE``, else ``.posenc_cache`` here)."""

import json
import sys
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from posenc.cells.keys import register_resolver
from posenc.cells.plan import sweep_jobs
from posenc.confdir import CONF_DIR
from posenc.corpora import CorpusError, prepare_corpus
from posenc.harness.presets import experiment_as_override

USAGE = "usage: posenc-prepare [-m|--multirun] [--config-dir DIR] [KEY=VALUE ...] (the overrides of posenc-run)"


class PrepareError(Exception):
    """A bad command line or config: one line, exit 2."""


def compose(overrides: list):
    """The root config with ``overrides``, Hydra's node included and set as the run's, so that
    ``paths.cache_dir`` resolves as in a cell (``${hydra:runtime.cwd}``)."""
    register_resolver()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as err:
        raise PrepareError(" ".join(str(err).split())) from None
    HydraConfig.instance().set_config(cfg)
    return cfg


def jobs(overrides: list, multirun: bool) -> list:
    """Each cell's overrides: the command line's (one run), or the sweep's cells (``-m``: the preset's
    ``hydra.sweeper.params`` and the command line, as Hydra's basic sweeper expands them). A swept
    range (a tuning sweep's ``interval(...)``) names no corpus and is left out; one of a data key is refused."""
    if not multirun:
        return [overrides]
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
    except HydraException as err:
        raise PrepareError(" ".join(str(err).split())) from None
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    params = compose(fixed).hydra.sweeper.get("params") or {}
    arguments, kept = parser.parse_overrides([f"{k}={v}" for k, v in params.items()]) + parsed, []
    for override in arguments:
        if not override.is_sweep_override() or override.is_discrete_sweep():
            kept.append(override)
        elif override.get_key_element().lstrip("+~").startswith("data"):
            raise PrepareError(f"{override.input_line}: a data key swept over a range names no corpus; "
                               "allowed: a list of values")
    return sweep_jobs(kept)


def corpora(overrides: list, multirun: bool) -> dict:
    """``{key: (data node, cache dir)}``: each distinct corpus of the run or sweep, in the order first named."""
    found = {}
    for job in jobs(overrides, multirun):
        cfg = compose(job)
        try:
            data = OmegaConf.to_container(cfg.data, resolve=True)
        except OmegaConfBaseException:  # e.g. data.dir=??? unset: prepare_corpus says which key, in one line
            data = cfg.data
        key = json.dumps([data, str(cfg.paths.cache_dir)], sort_keys=True, default=str)
        found.setdefault(key, (cfg.data, Path(cfg.paths.cache_dir)))
    return found


def where(prepared) -> str:
    """One line: the corpus, its pair and splits, and where it is (for a data-bin, where it trains from too)."""
    splits = ", ".join(f"{split} {n}" for split, n in prepared.sizes.items() if n is not None)
    trains = f"; trains on {prepared.bin_dir}" if prepared.databin else ""
    entry = prepared.entry or prepared.bin_dir.parent
    return f"{prepared.name} ({prepared.src}-{prepared.tgt}; {splits}): {entry}{trains}"


def parse_argv(argv: list):
    """``(multirun, overrides)`` of the command line; ``--config-dir DIR`` becomes Hydra's search path."""
    multirun, overrides, words = False, [], list(argv)
    while words:
        word = words.pop(0)
        if word in ("-m", "--multirun"):
            multirun = True
        elif word in ("-h", "--help"):
            print(USAGE + "\n\n" + (__doc__ or "").split("\n\n")[0])
            sys.exit(0)
        elif word == "--config-dir" or word.startswith("--config-dir="):
            directory = word.split("=", 1)[1] if "=" in word else (words.pop(0) if words else "")
            if not directory:
                raise PrepareError("--config-dir needs a directory")
            overrides.append(f"hydra.searchpath=[file://{Path(directory).resolve()}]")
        elif word.startswith("-"):
            raise PrepareError(f"unknown option {word}; {USAGE}")
        else:
            overrides.append(word)
    return multirun, experiment_as_override(overrides)


def main(argv=None) -> None:
    """Prepare every corpus the overrides name (progress on stderr), then one line each on stdout."""
    def log(line: str) -> None:
        print(f"posenc-prepare: {line}", file=sys.stderr, flush=True)

    try:
        multirun, overrides = parse_argv(sys.argv[1:] if argv is None else argv)
        for data, cache in corpora(overrides, multirun).values():
            print(f"prepared {where(prepare_corpus(data, cache, log=log))}", flush=True)
    except (PrepareError, CorpusError) as err:
        print(f"posenc-prepare: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
