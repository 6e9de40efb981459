"""What fairseq's children get from the harness: the user's environment plus exactly the documented
variables (posenc/harness/config/environment.py), and commands.sh exporting the same ones."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from posenc.harness.config import environment
from posenc.harness.config.commands import commands_script
from posenc.harness.config.environment import ALWAYS, added_environment, thread_count
from posenc.harness.errors import ConfigError
from posenc.harness.run.step import run_step
from project import compose_cell

CONF = Path(__file__).resolve().parents[1] / "conf"
# What bash itself puts into every environment it runs a command in.
BASH_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}
DUMP_ENV = "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"


pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def runtime_of(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides)).runtime


def test_the_default_adds_only_what_fairseq_needs():
    runtime = runtime_of()
    assert (runtime.threads, runtime.omp_wait_policy) == (None, None)
    assert added_environment(runtime) == ALWAYS == {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "PYTHONUNBUFFERED": "1"}


def test_busy_preset_asks_for_passive_waiting():
    assert added_environment(runtime_of("runtime=busy")) == {**ALWAYS, "OMP_WAIT_POLICY": "PASSIVE"}


def test_an_explicit_thread_count_is_passed_on():
    assert added_environment(runtime_of("runtime.threads=3"))["OMP_NUM_THREADS"] == "3"
    assert thread_count(None) is None and thread_count(2) == 2


def test_cells_side_by_side_get_their_share_only_when_the_config_names_no_thread_count():
    """The share itself is posenc.harness.launch.parallel's; runtime.threads, when set, wins."""
    from posenc.harness.launch.parallel import cell_resources
    joblib = OmegaConf.create({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
                               "n_jobs": 2})
    for overrides, expected in (([], "share"), (["runtime.threads=3"], None)):
        cell = compose_cell("gpus=0", *overrides)
        with cell_resources(cell, joblib, 4, Path("/nonexistent")) as env:
            assert ("OMP_NUM_THREADS" in env) == (expected == "share")


@pytest.mark.parametrize("override,message", [
    ("runtime.threads=0", "runtime.threads=0 is not allowed; allowed: null or a whole number >= 1"),
    ("runtime.threads=2.5", "runtime.threads=2.5 is not allowed; allowed: null or a whole number >= 1"),
    ("runtime.omp_wait_policy=SLEEPY",
     "runtime.omp_wait_policy='SLEEPY' is not allowed; allowed: null, PASSIVE, ACTIVE"),
    ("runtime.deterministic=maybe",
     "runtime.deterministic='maybe' is not allowed; allowed: true (deterministic GPU kernels: a GPU cell repeats bit "
     "for bit, slower) or false (torch's defaults)"),
])
def test_bad_runtime_values_are_refused(override, message):
    with pytest.raises(ConfigError) as err:
        added_environment(runtime_of(override))
    assert str(err.value) == message


@pytest.mark.parametrize("overrides", [[], ["runtime=busy"], ["runtime.threads=1"]])
def test_children_and_commands_sh_get_the_user_environment_plus_exactly_the_documented_variables(
        tmp_path, monkeypatch, overrides):
    # The user's own settings, including ones the harness used to override behind their back.
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("POSENC_TEST_MARKER", "a value with spaces and 'quotes'")
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.delenv("KMP_INIT_AT_FORK", raising=False)  # joblib's, if another test imported it (see below)
    user_env = dict(os.environ)
    added = added_environment(runtime_of(*overrides))
    documented = dict(ALWAYS)
    if "runtime=busy" in overrides:
        documented["OMP_WAIT_POLICY"] = "PASSIVE"
    if "runtime.threads=1" in overrides:
        documented["OMP_NUM_THREADS"] = "1"
    assert added == documented

    # 1. What a child started by the harness sees.
    run_step("dump", [sys.executable, "-c", DUMP_ENV, str(tmp_path / "child.json")], tmp_path / "dump.log", env=added)
    child = json.loads((tmp_path / "child.json").read_text())
    assert child == {**user_env, **documented}

    # 2. What the same command sees when commands.sh runs it by hand.
    script = tmp_path / "commands.sh"
    script.write_text(commands_script(tmp_path, added, [sys.executable, "-c", DUMP_ENV, str(tmp_path / "by_hand.json")],
                                      {"test": [sys.executable, "-c", "print('H-0\\tx')"]}))
    proc = subprocess.run(["bash", str(script)], env=user_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    by_hand = json.loads((tmp_path / "by_hand.json").read_text())
    assert {k: v for k, v in by_hand.items() if k not in BASH_OWN} == \
        {k: v for k, v in child.items() if k not in BASH_OWN}
    assert (tmp_path / "generate-test.log").read_text() == "H-0\tx\n"


def test_commands_sh_quotes_every_word(tmp_path):
    """Values with spaces, quotes and shell syntax reach the command exactly as the harness passed them."""
    odd = ["a b", "it's", '"quoted"', "$HOME", "`date`", "semi;colon", "(0.9, 0.98)", "*"]
    out = tmp_path / "argv.json"
    job_dir = tmp_path / "a dir with spaces"
    job_dir.mkdir()
    script = job_dir / "commands.sh"
    script.write_text(commands_script(job_dir, {"SOME_VAR": "x y"},
                                      [sys.executable, "-c",
                                       "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))",
                                       str(out), *odd], {}))
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == odd


def test_what_libraries_put_into_posenc_runs_own_environment_stays_there(monkeypatch):
    """joblib, imported when Hydra scans its launcher plugins, sets KMP_INIT_AT_FORK in the parent."""
    monkeypatch.setattr(environment, "STARTUP_ENV", {"PATH": "/bin"})
    monkeypatch.setenv("KMP_INIT_AT_FORK", "FALSE")
    assert "KMP_INIT_AT_FORK" not in environment.child_environment(ALWAYS)
    monkeypatch.setattr(environment, "STARTUP_ENV", {"KMP_INIT_AT_FORK": "FALSE"})  # the user's own: kept
    assert environment.child_environment(ALWAYS)["KMP_INIT_AT_FORK"] == "FALSE"


def test_runtime_and_redo_change_neither_a_cells_directory_nor_its_result_hash():
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from posenc.harness.hashing import config_hash
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        plain = compose(config_name="config", overrides=["placement=both"], return_hydra_config=True)
        tuned = compose(config_name="config", overrides=["placement=both", "runtime=busy", "runtime.threads=2",
                                                          "redo=true"], return_hydra_config=True)
    naming = tuned.hydra.job.config.override_dirname
    parsed = OverridesParser.create().parse_overrides(list(tuned.hydra.overrides.task))
    assert get_overrides_dirname(overrides=parsed, exclude_keys=list(naming.exclude_keys), item_sep=naming.item_sep,
                                 kv_sep=naming.kv_sep) == "placement=both"
    assert config_hash(plain) == config_hash(tuned)


def test_the_deterministic_mode_reaches_the_trainer_and_the_hashes_only_where_it_changes_results():
    from posenc.harness.config.commands import train_command
    from posenc.trainer.deterministic import CUBLAS_CONFIG, CUBLAS_VARIABLE, FLAG

    plain, asked = compose_cell("placement=both"), compose_cell("placement=both", "runtime.deterministic=true")
    assert (plain.deterministic, asked.deterministic) == (False, True)
    assert FLAG in train_command("/bin", "/save", asked) and FLAG not in train_command("/bin", "/save", plain)
    assert asked.environment[CUBLAS_VARIABLE] == CUBLAS_CONFIG and CUBLAS_VARIABLE not in plain.environment
    # A GPU cell (gpus=1, the default) trains other bits in the mode: hashed apart. A CPU cell does not.
    assert asked.hashes.config != plain.hashes.config and asked.hashes.training != plain.hashes.training
    cpu, cpu_asked = compose_cell("placement=both", "gpus=0"), compose_cell("placement=both", "gpus=0",
                                                                          "runtime.deterministic=true")
    assert cpu_asked.hashes == cpu.hashes and FLAG in train_command("/bin", "/save", cpu_asked)
    with pytest.raises(ConfigError, match=r"^runtime.deterministic='yes' is not allowed; allowed: true"):
        compose_cell("placement=both", "runtime.deterministic=yes")
