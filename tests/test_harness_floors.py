"""The harness's floors: its imports run one way, down; nothing below it imports it; and a cell's
composed config has one reader, ``resolve_cell``.

The floors, lowest first (docs/design.md, "Map of the code", says
the same). A module may import its own floor and the ones below, never one above:

1. base: ``errors.py`` (``ConfigError``), ``hashing.py``, ``study.py``, ``fairseq_logs.py`` (reading
   fairseq's log lines, which both running a cell and tracking it stand on), ``machine.py`` (the CPU,
   the GPUs and their free memory);
2. ``config/``: the config resolved once into a ``ResolvedCell``, every refusal (the logger's too);
3. ``tracking/``: what a user watches (progress lines, W&B runs), given a ``ResolvedCell``;
4. ``run/``: running a cell (the lifecycle, fairseq's children, signals, the lock, the SLURM job it
   runs in, how a job ends), which reports to tracking;
5. ``launch/``: where cells run (side by side on one machine, the SLURM launcher);
6. ``sweep/``: a sweep's planning, sweepers and end;
7. ``app.py``: the Hydra application, which wires them.
"""

import ast
import dataclasses
from pathlib import Path

import pytest
from omegaconf import DictConfig, ListConfig

from project import compose_cfg

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")  # the config is composed here

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "posenc" / "harness"
FLOORS = [
    ("base", ("__init__.py", "errors.py", "hashing.py", "study.py", "fairseq_logs.py", "presets.py", "machine.py")),
    ("config", ("config/",)),
    ("tracking", ("tracking/",)),
    ("run", ("run/",)),
    ("launch", ("launch/",)),
    ("sweep", ("sweep/",)),
    ("app", ("app.py", "prepare.py")),
]


def floor_of(path: Path) -> int:
    """The floor of a file of posenc/harness; a new module must be given one here."""
    relative = path.relative_to(HARNESS).as_posix()
    for level, (_, homes) in enumerate(FLOORS):
        if any(relative == home or (home.endswith("/") and relative.startswith(home)) for home in homes):
            return level
    raise AssertionError(f"posenc/harness/{relative} is on no floor: give it one in FLOORS "
                         "(tests/test_harness_floors.py)")


def module_file(name: str):
    """The file of module ``posenc.x.y`` (a package's __init__.py), or None outside the repository."""
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported_files(path: Path) -> list:
    """``(line, file)`` of every posenc module ``path`` imports, at its top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from posenc.harness.run import signals`` imports the module run/signals.py
            names = [f"{node.module}.{alias.name}" if module_file(f"{node.module}.{alias.name}") else node.module
                     for alias in node.names]
        else:
            continue
        found += [(node.lineno, module_file(name)) for name in names if name.startswith("posenc")]
    return [(line, file) for line, file in found if file is not None]


def upward_imports(root: Path) -> list:
    """Every import inside posenc/harness (under ``root``) that reaches a higher floor."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, target in imported_files(path):
            if HARNESS in target.parents and floor_of(target) > floor_of(path):
                found.append(f"{path.relative_to(REPO)}:{line} imports {target.relative_to(REPO)} "
                             f"({FLOORS[floor_of(path)][0]} < {FLOORS[floor_of(target)][0]})")
    return found


def test_no_import_inside_the_harness_runs_back_up():
    found = upward_imports(HARNESS)
    assert not found, "imports that run up the harness's floors:\n" + "\n".join(found)


def test_the_floor_rule_catches_an_import_that_runs_up(tmp_path, monkeypatch):
    """The rule can fail: a cell module that imports tracking is caught (a copy of the harness)."""
    import shutil
    copy = tmp_path / "posenc" / "harness"
    shutil.copytree(HARNESS, copy)
    resolve = copy / "config" / "resolve.py"
    resolve.write_text("from posenc.harness.tracking.wandb_run import cell_summary\n" + resolve.read_text())
    monkeypatch.setattr(__import__(__name__), "HARNESS", copy)
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert [line.split(" imports ")[0] for line in upward_imports(copy)] == ["posenc/harness/config/resolve.py:1"]


def test_no_module_below_the_harness_imports_it():
    """posenc's other packages (cells, corpora, report, stats, analysis, ...) never import the
    harness; only the harness's own entry points (hydra_plugins/, experiments/) sit above it."""
    found = []
    for path in sorted((REPO / "posenc").rglob("*.py")):
        if HARNESS in path.parents:
            continue
        found += [f"{path.relative_to(REPO)}:{line} imports {target.relative_to(REPO)}"
                  for line, target in imported_files(path) if HARNESS in target.parents or target == HARNESS]
    assert not found, "modules below the harness that import it:\n" + "\n".join(found)


def config_reads(source: str) -> list:
    """Where ``run_job`` (posenc/harness/app.py) uses its ``cfg``, other than handing it to ``resolve_cell``."""
    run_job = next(node for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.FunctionDef) and node.name == "run_job")
    handed = {id(call.args[0]) for call in ast.walk(run_job)
              if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "resolve_cell"
              and call.args and getattr(call.args[0], "id", "") == "cfg"}
    return [f"app.py:{node.lineno}" for node in ast.walk(run_job)
            if isinstance(node, ast.Name) and node.id == "cfg" and id(node) not in handed]


def test_resolve_cell_is_the_only_reader_of_the_composed_config():
    """``run_job`` hands its config to ``resolve_cell`` and to nothing else: everything after it
    (the label, resources, hardware checks, the run, W&B, the exit code) takes what it returned."""
    source = (HARNESS / "app.py").read_text(encoding="utf-8")
    assert "resolve_cell(cfg)" in source
    assert config_reads(source) == []
    # The rule can fail: a read of the config after resolving is caught.
    read_back = source.replace("    resolved = resolve_cell(cfg)\n",
                               "    resolved = resolve_cell(cfg)\n    print(cfg.gpus)\n")
    assert read_back != source and len(config_reads(read_back)) == 1


def test_what_resolve_cell_returns_carries_no_config_node():
    """Nothing smuggles the config past ``resolve_cell``: no field of ``Resolved``, its name or its
    ``ResolvedCell`` is a config node; the corpus's node is parsed there (``ResolvedCell.data``, a ``CorpusConfig``)."""
    from posenc.corpora import CorpusConfig
    from posenc.harness.config.resolve import resolve_cell
    resolved = resolve_cell(compose_cfg("paths.cache_dir=/no/cache", "logger=wandb", hydra=False))
    assert isinstance(resolved.cell.data, CorpusConfig)
    nodes = []
    for owner in (resolved, resolved.name, resolved.cell):
        for f in dataclasses.fields(owner):
            if isinstance(getattr(owner, f.name), (DictConfig, ListConfig)):
                nodes.append(f"{type(owner).__name__}.{f.name}")
    assert nodes == []


def test_importing_the_keys_or_the_plan_reader_registers_no_resolver():
    """The resolver is registered where a config that names it is composed or read, never as a
    side effect of an import (a fresh interpreter: this one's conftest has registered it)."""
    import subprocess
    import sys
    code = ("import posenc.cells.keys, posenc.cells.plan, posenc.cells.sweep; from omegaconf import OmegaConf; "
            "print(OmegaConf.has_resolver('posenc_keys'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "False"


def test_only_the_application_and_the_sweepers_read_hydras_own_config():
    """A cell's job knows Hydra's side once (``posenc.harness.app.Job``) and hands on what the rest
    needs (the W&B run's name and group): no lower floor reads ``HydraConfig``. (``posenc-prepare``,
    the other application, sets it for the configs it composes, as a job has it.)"""
    harness = REPO / "posenc" / "harness"
    readers = sorted(str(p.relative_to(harness)) for p in harness.rglob("*.py") if "HydraConfig" in p.read_text())
    assert all(r in ("app.py", "prepare.py") or r.startswith("sweep/") for r in readers), readers


RECORD_WRITERS = {"posenc/cells/record.py", "posenc/harness/run/lifecycle.py", "posenc/harness/run/records.py"}


def test_one_room_builds_and_writes_a_cells_record():
    """A cell's ``result.json`` is built and written by its run (``run/lifecycle.py``) and by
    ``run/records.py`` (refused, stopped before training, not requeued, a SLURM job that ended
    without a result), never by the cell's resolution, the application or a launcher."""
    makers = {"new_record"}
    outcomes = {"fail", "interrupt", "prune", "finish"}
    found = set()
    for path in (REPO / "posenc").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            named = isinstance(f, ast.Name) and f.id in makers
            changed = isinstance(f, ast.Attribute) and f.attr in outcomes | {"write"} and \
                isinstance(f.value, ast.Name) and "record" in f.value.id.lower()
            if named or changed:
                found.add(str(path.relative_to(REPO)))
    assert found <= RECORD_WRITERS and "posenc/harness/run/records.py" in found, sorted(found - RECORD_WRITERS)
