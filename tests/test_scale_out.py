"""From laptop to cluster: precision and GPUs as fairseq flags, cells side by side (threads, GPUs),
and the SLURM launchers composed down to the sbatch script they would submit."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from posenc.harness.config.commands import generate_command, train_command
from posenc.harness.config.precision import check_gpu_settings, check_hardware
from posenc.harness.config.resolve import resolve_cell
from posenc.harness.errors import ConfigError
from posenc.harness.launch.parallel import concurrent_cells, gpu_slots, thread_share, threads_env, visible_gpus
from project import REPO, cell_of, compose_cell, compose_cfg

BIN = Path(sys.executable).parent


pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def commands(*overrides):
    cell = cell_of(resolve_cell(compose_cfg("paths.cache_dir=/no/cache", *overrides)))
    return (train_command("bin", "ckpt", cell),
            generate_command("bin", "ckpt/checkpoint_best.pt", "test", "", cell))


def after(argv, flag):
    return argv[argv.index(flag) + 1]


def test_the_hydra_parent_imports_neither_torch_nor_fairseq_with_these_features():
    code = ("import sys, posenc.harness.app, posenc.harness.tracking.wandb_run, posenc.harness.launch.parallel, "
            "posenc.harness.config.precision, wandb, hydra_plugins.hydra_joblib_launcher.joblib_launcher, "
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher; "
            "from posenc.harness.launch.parallel import machine_cores; machine_cores(); "
            "print(sorted(m for m in ('torch', 'fairseq') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "[]", proc.stderr[-2000:]


# --- precision and GPUs per cell --------------------------------------------------------------------

def test_fp32_is_fairseq_trains_main_through_the_entry_on_one_device():
    train, generate = commands()
    assert train[:3] == [sys.executable, "-m", "posenc.trainer.train"]  # stock main; SIGTERM saves and stops
    assert "--fp16" not in train and "--bf16" not in train and "--cpu" not in train
    # fairseq's default world size is every visible GPU; a cell's batch must not depend on the machine.
    assert after(train, "--distributed-world-size") == "1"
    assert "--cpu" not in generate and "--fp16" not in generate


def test_fp16_adds_fairseqs_flag_to_the_trainer():
    train, generate = commands("precision=fp16")
    assert train[:3] == [sys.executable, "-m", "posenc.trainer.train"] and train.count("--fp16") == 1
    assert "--bf16" not in train
    assert "--fp16" not in generate  # generation runs in fp32


def test_bf16_trains_through_the_entry_that_keeps_it_off_the_tpu():
    train, _ = commands("precision=bf16", "model=transformer_iwslt_de_en", "pe=rope")
    assert train[:3] == [sys.executable, "-m", "posenc.trainer.train"]
    assert train.count("--bf16") == 1 and "--tpu" not in train
    assert after(train, "--encoder-pos") == "rope" and after(train, "--distributed-world-size") == "1"


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_several_gpus_per_cell_are_fairseqs_world_size(gpus):
    train, generate = commands(f"gpus={gpus}", "precision=fp16", "model=fconv_table4", "data=wmt14_en_de",
                               "budget=paper")
    assert after(train, "--distributed-world-size") == str(gpus)
    assert "--fp16" in train and after(train, "--max-tokens") == "4000" and after(train, "--optimizer") == "nag"
    assert "--distributed-world-size" not in generate  # one device generates


def test_gpus_0_is_the_cpu_in_training_and_generation():
    train, generate = commands("gpus=0", "precision=bf16")
    assert "--cpu" in train and after(train, "--distributed-world-size") == "1" and "--bf16" in train
    assert "--cpu" in generate


PARSE_BOTH_WAYS = """
import json, sys
import posenc.trainer.train as entry  # first, as in the real entry: fairseq_cli.train sets up logging
from fairseq import options
argv = sys.argv[1:]
stock = options.parse_args_and_arch(options.get_training_parser(), input_args=argv)
ours, with_tpu = entry.parse(argv), entry.parse(argv + ["--tpu"])
print(json.dumps({"stock": [stock.bf16, stock.tpu], "ours": [ours.common.bf16, ours.common.tpu, ours.common.fp16],
                  "asked_for_tpu": with_tpu.common.tpu, "arch": ours.model.arch,
                  "world": ours.distributed_training.distributed_world_size}))
"""


def test_fairseq_parses_the_bf16_entry_as_bf16_on_the_gpu():
    """The reason for the entry: stock fairseq turns --bf16 into --tpu (fairseq #4696). Parsed in a
    fresh process: fairseq composes its config through Hydra's global state, which this test
    process has set up for its own configs."""
    import json
    argv = ["data-bin", "--user-dir", str(REPO / "posenc" / "fairseq_plugin"), "--task", "translation",
            "--arch", "posenc_transformer_small", "--optimizer", "adam", "--lr", "0.001", "--bf16",
            "--distributed-world-size", "1"]
    proc = subprocess.run([sys.executable, "-c", PARSE_BOTH_WAYS, *argv], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert parsed["stock"] == [True, True]  # stock: bf16 means a TPU
    assert parsed["ours"] == [True, False, False]  # the entry: bf16 on whatever device fairseq picks
    assert parsed["arch"] == "posenc_transformer_small" and parsed["world"] == 1
    assert parsed["asked_for_tpu"] is True  # --tpu asked for: kept


@pytest.mark.parametrize("overrides,message", [
    (["precision=fp8"], "precision='fp8' is not allowed; allowed: fp32, fp16, bf16"),
    (["gpus=-1"], "gpus=-1 is not allowed; allowed: 0 (CPU only) or a number of GPUs per cell (1, 2, ...)"),
    (["precision=fp16", "gpus=0"], "precision=fp16 with gpus=0 is not possible: fairseq's --fp16 needs a CUDA GPU; "
                                   "allowed on the CPU: fp32, bf16"),
])
def test_bad_gpu_settings_are_refused_with_the_allowed_values(overrides, message):
    with pytest.raises(ConfigError) as err:
        check_gpu_settings(compose_cfg(*overrides))
    assert str(err.value) == message


def test_a_cell_needing_cuda_is_refused_where_torch_sees_none():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # torch sees no GPU here, on any machine
    check_hardware(compose_cell("precision=bf16"), env)  # runs anywhere: no probe, no error
    with pytest.raises(ConfigError, match=r"^precision=fp16 gpus=1 needs 1 CUDA device\(s\); this machine shows 0 "):
        check_hardware(compose_cell("precision=fp16"), env)
    with pytest.raises(ConfigError, match=r"needs 2 CUDA device\(s\); this machine shows 0 \(gpus=2 trains on 2 GPUs"):
        check_hardware(compose_cell("gpus=2"), env)


def test_posenc_run_refuses_fp16_without_a_gpu_in_one_line(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", POSENC_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([str(BIN / "posenc-run"), "precision=fp16", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "posenc-run: error: precision=fp16 gpus=1 needs 1 CUDA device(s); this machine shows 0")
    assert not (tmp_path / "cache").exists()  # refused before the corpus was built


# --- cells side by side -----------------------------------------------------------------------------

def test_concurrency_of_each_launcher():
    joblib = compose_cfg("hydra/launcher=joblib", "hydra.launcher.n_jobs=2").hydra.launcher
    assert concurrent_cells(joblib, 12) == 2 and concurrent_cells(joblib, 1) == 1
    every_core = compose_cfg("hydra/launcher=joblib").hydra.launcher  # the plugin's default, n_jobs=-1
    assert concurrent_cells(every_core, 12, cores=8) == 8 and concurrent_cells(every_core, 4, cores=8) == 4
    all_but_one = compose_cfg("hydra/launcher=joblib", "hydra.launcher.n_jobs=-2").hydra.launcher
    assert concurrent_cells(all_but_one, 12, cores=8) == 7
    assert concurrent_cells(compose_cfg("hydra/launcher=submitit_local").hydra.launcher, 12) == 12
    assert concurrent_cells(compose_cfg().hydra.launcher, 12) == 1  # basic: one after another
    assert concurrent_cells(compose_cfg("hydra/launcher=slurm").hydra.launcher, 12) == 1  # own allocation


def test_thread_share_and_the_users_own_setting():
    assert [thread_share(n, cores=16) for n in (1, 2, 3, 16, 40)] == [16, 8, 5, 1, 1]
    assert threads_env(1, environ={}) == {}  # alone: fairseq's own default
    assert threads_env(2, environ={})["OMP_NUM_THREADS"] == str(thread_share(2))
    assert threads_env(2, environ={"OMP_NUM_THREADS": "3"}) == {"OMP_NUM_THREADS": "3"}  # the user's (or joblib's) wins


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == [] and visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []


def test_cells_side_by_side_never_share_a_gpu(tmp_path):
    """Three cells on two GPUs: two run on different GPUs, the third waits for whichever ends first."""
    seen, lock = [], threading.Lock()
    first_done = threading.Event()

    def cell(name, hold_s):
        with gpu_slots(tmp_path / "slots", ["0", "1"], 1, poll_s=0.05) as mine:
            with lock:
                seen.append((name, time.monotonic(), tuple(mine)))
            time.sleep(hold_s)
        if name == "b":
            first_done.set()

    a = threading.Thread(target=cell, args=("a", 1.5))
    b = threading.Thread(target=cell, args=("b", 0.3))
    a.start(), b.start()
    time.sleep(0.1)
    c = threading.Thread(target=cell, args=("c", 0.0))
    c.start()
    for t in (a, b, c):
        t.join(10)
    got = {name: (when, gpus) for name, when, gpus in seen}
    assert {got["a"][1], got["b"][1]} == {("0",), ("1",)}
    assert got["c"][1] == got["b"][1]  # b's GPU, once b let it go (a still held the other)
    assert first_done.is_set()


def test_two_gpus_per_cell_take_two_and_too_many_is_refused(tmp_path):
    with gpu_slots(tmp_path, ["0", "1", "2", "3"], 2) as first, gpu_slots(tmp_path, ["0", "1", "2", "3"], 2) as second:
        assert len(first) == len(second) == 2 and not set(first) & set(second)
    with pytest.raises(ConfigError, match=r"^gpus=3 per cell, but this machine shows 2 GPU\(s\) \(0, 1\)"):
        with gpu_slots(tmp_path, ["0", "1"], 3):
            pass


# --- SLURM: composed, down to the sbatch script, never submitted ----------------------------------

def sbatch_script(tmp_path, *overrides):
    """Run the real ``posenc-run -m`` with a stand-in ``sbatch`` that keeps the script and refuses
    it, and ``srun`` present (submitit checks for it). Returns the ``#SBATCH`` options."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "sbatch").write_text('#!/bin/sh\ncp "$1" "$SBATCH_CAPTURE"\n'
                                 'echo "sbatch: test, not submitted" >&2\nexit 1\n')
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("sbatch", "srun"):
        (fake / tool).chmod(0o755)
    captured = tmp_path / "captured.sh"
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SBATCH_CAPTURE=str(captured))
    proc = subprocess.run([str(BIN / "posenc-run"), "-m", "experiment=table4", *overrides,
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and "sbatch: test, not submitted" in proc.stderr
    assert captured.exists(), proc.stderr[-3000:]
    text = captured.read_text()
    assert (tmp_path / "sweep" / "multirun.yaml").exists()  # the plan posenc-table reads
    return dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", text, flags=re.M)), text


def test_the_projects_slurm_preset_becomes_these_sbatch_options(tmp_path):
    options, text = sbatch_script(tmp_path, "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "gpus=2",
                                  "hydra.launcher.array_parallelism=4", "hydra.launcher.timeout_min=600")
    assert options["partition"] == "gpu"
    assert options["gpus-per-node"] == "2"  # from gpus=2, the cell's own GPUs
    assert options["time"] == "600"
    assert options["array"] == "0-11%4"  # the 12 Table 4 cells, at most 4 at a time
    assert (options["cpus-per-task"], options["mem"], options["nodes"], options["ntasks-per-node"]) == \
        ("8", "32GB", "1", "1")
    assert options["job-name"] == "posenc-table4"
    assert f"{sys.executable} -u -m submitit.core._submit" in text  # this venv's python runs the cells


def test_hydras_submitit_slurm_with_overrides(tmp_path):
    options, _ = sbatch_script(tmp_path, "hydra/launcher=submitit_slurm", "hydra.launcher.partition=dev",
                               "hydra.launcher.gpus_per_node=1", "hydra.launcher.timeout_min=30",
                               "hydra.launcher.cpus_per_task=4", "placement=both,none", "seed=1,2,3")
    assert (options["partition"], options["gpus-per-node"], options["time"], options["cpus-per-task"]) == \
        ("dev", "1", "30", "4")
    assert options["array"] == "0-5%6"  # 2 placements x 3 seeds; the plugin's default parallelism is 256


def test_cells_per_task_puts_that_many_cells_in_one_array_task_as_its_slurm_tasks(tmp_path):
    options, _ = sbatch_script(tmp_path, "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "gpus=1",
                               "hydra.launcher.cells_per_task=4", "hydra.launcher.array_parallelism=2")
    assert options["array"] == "0-2%2"  # the 12 Table 4 cells in 3 array tasks of 4
    assert options["ntasks-per-node"] == "4"  # a process per cell, each with its own cores
    assert (options["gpus-per-node"], options["cpus-per-task"], options["mem"]) == ("1", "8", "32GB")


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "two"])
def test_a_bad_cells_per_task_is_refused_in_one_line(tmp_path, value):
    proc = subprocess.run([str(BIN / "posenc-run"), "-m", "experiment=table4", "hydra/launcher=slurm",
                           f"hydra.launcher.cells_per_task={value}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"posenc-run: error: hydra.launcher.cells_per_task={value} is not allowed; allowed: a whole number >= 1 "
        "of cells that share one array task and its GPU(s) (1, the default: a task per cell)")
    assert "Traceback" not in proc.stderr
