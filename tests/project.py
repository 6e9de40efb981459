"""The project as the tests reach it: its config tree composed as ``posenc-run`` composes it, and
``posenc-run`` run as a user types it, in a child process."""

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
BIN = Path(sys.executable).parent


def compose_cfg(*overrides, hydra=True):
    """The root config with ``overrides`` (and Hydra's own node, unless ``hydra=False``)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra)


def _posencs(entry) -> bool:
    return getattr(entry, "provider", "") == "posenc"


@contextlib.contextmanager
def hidden_fairseq_config_store():
    """Hide what fairseq put into Hydra's global ConfigStore when it was imported (its own ``config``
    schema and groups, which would be composed into ours) for the time of the ``with``; Hydra's own
    entries and posenc's (``hydra_plugins/posenc_config``, provider posenc) stay."""
    repo = ConfigStore.instance().repo
    hidden = {k: repo.pop(k) for k in list(repo) if k not in ("hydra", "_dummy_empty_config_.yaml")}
    for key, entry in hidden.items():  # posenc's entries, at the top or in a group (data/), back in
        if isinstance(entry, dict) and any(_posencs(e) for e in entry.values()):
            repo[key] = {name: e for name, e in entry.items() if _posencs(e)}
        elif _posencs(entry):
            repo[key] = entry
    try:
        yield
    finally:
        repo.update(hidden)


def child_env(cache=None, **extra) -> dict:
    """A user's bare environment for a child the suite starts: the venv's bin first on PATH, the
    corpus cache (if any), the suite's ``OMP_NUM_THREADS`` (tests/conftest.py says why), the
    developer's PYTHONPATH (a worktree's code, when the tests run against one), ``extra`` on top
    (a variable ``extra`` gives as None is left out)."""
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]}
    if cache is not None:
        env["POSENC_CACHE"] = str(cache)
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {k: v for k, v in {**env, **extra}.items() if v is not None}


def posenc_run(*args, cwd, cache, env=None, timeout=900):
    """``posenc-run ARGS`` in ``cwd`` with its own corpus cache, a bare environment and ``env`` on top."""
    child = child_env(cache, **(env or {}))
    return subprocess.run([str(BIN / "posenc-run"), *args], cwd=cwd, env=child, capture_output=True, text=True,
                          timeout=timeout)


def summary_line(stdout: str) -> str:
    """A sweep's summary line (``2 cells: 2 ok``) in its output; the compact table and the path of
    ``table.md`` come after it."""
    return next(line for line in stdout.splitlines() if re.match(r"\d+ cells: ", line))


def cell_of(resolved):
    """The ``ResolvedCell`` of a ``Resolved``, or its refusal raised (``ConfigError``): the tests'
    shorthand; the harness branches on the refusal once, in ``cell_job``."""
    if resolved.refused is not None:
        raise resolved.refused
    assert resolved.cell is not None, f"no cell: skipped by design ({resolved.skipped})"
    return resolved.cell


def compose_cell(*overrides):
    """The ``ResolvedCell`` of the root config with ``overrides``, as posenc-run resolves it (the
    corpus cache named, since its default is Hydra's runtime cwd, which only a running job has)."""
    from posenc.harness.config.resolve import resolve_cell
    return cell_of(resolve_cell(compose_cfg("paths.cache_dir=/no/cache", *overrides)))
