"""A non-editable install, as a user without a clone has it: the wheel built from this checkout
carries the Hydra configs, the papers' reference numbers and the Hydra plugins; installed into a
venv of its own, with no editable posenc on its path, ``posenc-run`` sweeps smoke cells from a
directory outside the clone (its configs from the package, its outputs and corpus cache under that
directory, nothing written into the package), ``posenc-table`` and ``posenc-pe`` read it, and a
user's own presets directory is swept through it.

Lean for CI: the wheel is built once (no build isolation, no network), the venv has no pip and
borrows the test venv's dependencies through a ``.pth`` line (which adds that directory to
``sys.path`` without running the ``.pth`` files in it, so the editable install's finder never
loads), and the sweeps train a few updates on a tiny corpus."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from project import REPO, summary_line

pytestmark = pytest.mark.slow

# What the wheel is built from: the package, the plugins and the files setup.py maps into it.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "posenc", "hydra_plugins", "conf", "results/reference")
TINY = ["budget=smoke", "budget.max_update=4", "data.generator.train=300", "data.generator.valid=30",
        "data.generator.test=30", "data.generator.test_long=0", "generation.test_long=false"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy of its sources (no build/ or egg-info in the clone)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(root / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel, = (root / "dist").glob("posenc-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A venv with the wheel installed and this test venv's site-packages, never its editable posenc."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # Installed before the .pth line exists: pip must not see the test venv's posenc as installed.
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def environment(venv: Path, **extra) -> dict:
    """A user's shell with the venv first on PATH; no PYTHONPATH (a worktree's code must not leak in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POSENC_CACHE", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv / 'bin'}:/usr/bin:/bin", **extra}


def run(venv, *argv, cwd, timeout=900, **extra):
    program = str(venv / "bin" / argv[0]) if argv[0] != "python" else str(venv / "bin" / "python")
    return subprocess.run([program, *map(str, argv[1:])], cwd=cwd, env=environment(venv, **extra),
                          capture_output=True, text=True, timeout=timeout)


def package_files(venv: Path) -> set:
    """Every file of the venv's site-packages but Python's bytecode caches."""
    return {p for p in next(venv.glob("lib/python*/site-packages")).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the clone."""
    where = tmp_path_factory.mktemp("elsewhere")
    assert REPO not in where.resolve().parents
    return where


@pytest.fixture(scope="module")
def swept(venv, outside):
    """Two smoke cells swept by the installed posenc-run from outside the clone, default cache."""
    before = package_files(venv)
    proc = run(venv, "posenc-run", "-m", *TINY, "placement=both,none", "hydra.sweep.dir=sweep", cwd=outside)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return outside / "sweep", proc, before


def test_the_wheel_carries_the_configs_the_references_and_the_plugins(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"posenc/conf/{p.relative_to(REPO / 'conf').as_posix()}" for p in (REPO / "conf").rglob("*.yaml")}
    assert "posenc/conf/config.yaml" in configs and "posenc/conf/experiment/table4.yaml" in configs
    assert configs <= names, sorted(configs - names)
    assert {"posenc/reference/convs2s_table4.csv", "posenc/reference/vaswani2017_table3_e.csv"} <= names
    assert {"hydra_plugins/posenc_sweeper/seeds.py", "hydra_plugins/posenc_sweeper/tune.py",
            "hydra_plugins/posenc_slurm_launcher/slurm_launcher.py", "posenc/fairseq_plugin/__init__.py"} <= names
    assert not any(n.startswith(("tests/", "conf/", "results/")) for n in names)


def test_the_installed_package_and_its_hydra_plugins_are_the_wheels(venv, outside):
    code = ("import posenc, posenc.confdir as c, hydra_plugins.posenc_sweeper as s, sys\n"
            "from hydra.core.plugins import Plugins\n"
            "from hydra.plugins.launcher import Launcher\n"
            "from hydra.plugins.sweeper import Sweeper\n"
            "found = [p.__module__ for kind in (Sweeper, Launcher) for p in Plugins.instance().discover(kind)]\n"
            "print(posenc.__file__, c.CLONE, c.CONF_DIR, c.REFERENCE_DIR, s.__file__, sep='\\n')\n"
            "print(' '.join(found))\n"
            "print(any('editable' in type(f).__module__ or 'editable' in str(f) for f in sys.meta_path))")
    proc = run(venv, "python", "-c", code, cwd=outside)
    assert proc.returncode == 0, proc.stderr[-3000:]
    package, clone, conf, reference, sweeper, found, editable = proc.stdout.splitlines()
    site = next(venv.glob("lib/python*/site-packages"))
    assert Path(package).parent == site / "posenc" and clone == "None" and editable == "False"
    assert Path(conf) == site / "posenc" / "conf" and Path(reference) == site / "posenc" / "reference"
    assert Path(sweeper).is_relative_to(site)
    assert {"hydra_plugins.posenc_sweeper.seeds", "hydra_plugins.posenc_sweeper.tune",
            "hydra_plugins.posenc_slurm_launcher.slurm_launcher"} <= set(found.split()), found


def test_a_smoke_sweep_from_outside_the_clone_then_posenc_table(venv, swept, outside):
    sweep, proc, before = swept
    site = next(venv.glob("lib/python*/site-packages"))
    assert summary_line(proc.stdout) == "2 cells: 2 ok"
    assert proc.stdout.rstrip("\n").splitlines()[-1] == f"Every table and note: {Path('sweep') / 'table.md'}"
    cells = sorted(sweep.glob("*/result.json"))
    assert len(cells) == 2 and (outside / ".posenc_cache" / "corpora").is_dir()   # the cache under the cwd
    hydra = (cells[0].parent / ".hydra" / "hydra.yaml").read_text()
    assert f"path: {site / 'posenc' / 'conf'}" in hydra                         # the packaged configs
    commands = (cells[0].parent / "commands.sh").read_text()
    # Stock fairseq-generate (as a module of the venv's python) with the installed plugin as --user-dir.
    assert f"{venv / 'bin' / 'python'} -m fairseq_cli.generate" in commands
    assert f"--user-dir {site / 'posenc' / 'fairseq_plugin'}" in commands
    assert package_files(venv) == before                                      # nothing written into the package
    table = run(venv, "posenc-table", "sweep", cwd=outside)
    assert table.returncode == 0, table.stderr[-3000:]
    # The paper's Δ beside the row: the reference numbers read from the package.
    assert "| fconv_small | learned | synthetic | neither | -0.5 |" in table.stdout
    compact = run(venv, "posenc-table", "sweep", "--compact", cwd=outside)
    assert compact.returncode == 0 and "| placement=none " in compact.stdout, compact.stderr[-3000:]
    assert all(len(line) <= 100 for line in compact.stdout.splitlines())


def test_stock_fairseq_train_with_the_installed_plugin_as_user_dir(venv, swept, outside):
    """fairseq's own trainer (its module: the venv borrows fairseq, not its console scripts) with
    ``--user-dir`` the installed package's plugin, on the smoke sweep's binarized corpus."""
    site = next(venv.glob("lib/python*/site-packages"))
    data = next((outside / ".posenc_cache" / "corpora").glob("*/bin/dict.en.txt")).parent
    proc = run(venv, "python", "-m", "fairseq_cli.train", data, "--user-dir", site / "posenc" / "fairseq_plugin",
               "--task", "translation", "--arch", "posenc_fconv_small", "--encoder-pos", "sinusoidal",
               "--decoder-pos", "none", "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400",
               "--max-update", "1", "--no-save", "--save-dir", "stock", "--no-progress-bar", "--cpu",
               "--num-workers", "0", cwd=outside, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert "model: PosencFConvModel" in log, log[-3000:]
    assert "done training" in log, log[-3000:]
    refused = run(venv, "python", "-m", "fairseq_cli.train", data, "--user-dir", site / "posenc" / "fairseq_plugin",
                  "--task", "translation", "--arch", "posenc_fconv_small", "--encoder-pos", "rope", "--cpu",
                  cwd=outside, timeout=300)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert "learned" in refused.stderr.strip().splitlines()[-1], refused.stderr[-3000:]


def test_posenc_pe_from_the_installed_package(venv, outside):
    proc = run(venv, "posenc-pe", "sinusoidal", "--dim", "16", "--max-len", "32", "--out", "pe", cwd=outside)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (outside / "pe" / "report.json").is_file()


def test_a_users_presets_directory_through_the_installed_package(venv, swept, tmp_path):
    """An experiment preset and a corpus preset of the user's own, in a directory outside the clone
    and the package, swept by name; a file named like a packaged preset is named in one warning."""
    presets = tmp_path / "my_presets"
    (presets / "experiment").mkdir(parents=True)
    (presets / "data").mkdir()
    (presets / "experiment" / "mine.yaml").write_text(
        "# @package _global_\n"
        "defaults:\n  - override /data: tiny\n"
        "experiment_name: mine\n"
        "hydra:\n  sweep:\n    dir: results/mine\n  sweeper:\n    params:\n      placement: none\n      seed: 1\n")
    (presets / "data" / "tiny.yaml").write_text(
        "defaults:\n  - synthetic\n  - _self_\n"
        "generator: {train: 300, valid: 30, test: 30, test_long: 0}\n")
    (presets / "experiment" / "table4.yaml").write_text("# @package _global_\nexperiment_name: never_used\n")
    cache = swept[0].parent / ".posenc_cache"   # the smoke sweep's corpus: a cache hit
    for pick in ("experiment=mine", "+experiment=mine"):   # either form picks the user's preset
        composed = run(venv, "posenc-run", "--config-dir", presets, pick, "--cfg", "job", cwd=tmp_path)
        assert composed.returncode == 0, composed.stderr[-3000:]
        assert "experiment_name: mine" in composed.stdout and "train: 300" in composed.stdout
    proc = run(venv, "posenc-run", "-m", f"hydra.searchpath=[file://{presets}]", "experiment=mine", "budget=smoke",
               "budget.max_update=4", "generation.test_long=false", cwd=tmp_path, POSENC_CACHE=str(cache))
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "packaged preset wins over yours" in line]
    assert len(warnings) == 1 and f"experiment/table4 ({presets})" in warnings[0], proc.stderr[-3000:]
    assert summary_line(proc.stdout) == "1 cells: 1 ok"
    record, = (tmp_path / "results" / "mine").glob("*/result.json")
    assert '"experiment": "mine"' in record.read_text() and "cache hit" in proc.stderr
    assert proc.stdout.rstrip("\n").splitlines()[-1] == f"Every table and note: {Path('results/mine/table.md')}"
    assert package_files(venv) == swept[2]                                    # nothing written into the package
