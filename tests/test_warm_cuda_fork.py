"""The warm trainer on GPU nodes, with CUDA faked (tests/fake_cuda/sitecustomize.py: torch's device
count falls back to the runtime and marks the process where NVML cannot count, as on a MIG slice or a
node without NVML, and a marked process's forked child fails as torch's does). The warm trainer must
never be marked before it forks (posenc.trainer.cuda_fork), and a cell forked from a marked one anyway
runs again cold, once. None of this has run on a GPU; the fake is what CUDA torch documents.

The failure the hiding prevents is shown by one script run two ways (``FORK_THEN_ASK``): bare, a
process that counts the devices then forks fails in the child on a MIG slice and a node without NVML;
started as the warm trainer's process starts (the GPUs hidden, its imports made), it does not."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.trainer.cuda_fork import BAD_FORK
from posenc.trainer.warm import WARM_START_MARK
from project import child_env, posenc_run, summary_line

FAKE = Path(__file__).parent / "fake_cuda"
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
MIG = "MIG-4b4f5a3c-0f6d-5d2e-9a51-1c2d3e4f5a6b"
FORK_THEN_ASK = ("import os, sys\n"
                 "if sys.argv[1] == 'warm':  # as the warm trainer's own process (its __main__) starts\n"
                 "    from posenc.trainer.cuda_fork import hide_gpus\n    hide_gpus()\n    import posenc.trainer.warm\n"
                 "import torch\ntorch.cuda.device_count()\npid = os.fork()\n"
                 "if pid == 0:\n"
                 "    try:\n        torch.cuda.is_available()\n    except RuntimeError as err:\n"
                 "        print(err, flush=True); os._exit(1)\n    os._exit(0)\n"
                 "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")


def faked(**extra) -> dict:
    """The environment of a child with CUDA faked (the suite's PYTHONPATH after the fake's folder)."""
    path = os.pathsep.join(p for p in (str(FAKE), os.environ.get("PYTHONPATH")) if p)
    return {"POSENC_FAKE_CUDA": "1", "PYTHONPATH": path, **extra}


def fork_then_ask(what: str, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FORK_THEN_ASK, what], env=child_env(**faked(**extra)),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("devices, no_nvml, fails", [(MIG, None, True), ("0", "1", True), ("0", None, False),
                                                    ("", "1", False)])
def test_the_fake_marks_a_process_where_nvml_cannot_count_and_fails_its_forked_child(devices, no_nvml, fails):
    proc = fork_then_ask("bare", CUDA_VISIBLE_DEVICES=devices, POSENC_FAKE_NO_NVML=no_nvml)
    assert (proc.returncode != 0) == fails, proc.stdout + proc.stderr
    assert (BAD_FORK in proc.stdout) == fails


@pytest.mark.slow
@pytest.mark.parametrize("node", [{"CUDA_VISIBLE_DEVICES": MIG}, {"POSENC_FAKE_NO_NVML": "1"}])
def test_the_warm_trainer_imports_torch_and_fairseq_without_marking_itself(node):
    proc = fork_then_ask("warm", **node)
    assert proc.returncode == 0 and BAD_FORK not in proc.stdout, proc.stdout + proc.stderr[-2000:]


def sweep(tmp_path: Path, **extra):
    proc = posenc_run("-m", "budget=smoke", "placement=both,none", *SMALL_DATA, f"hydra.sweep.dir={tmp_path / 's'}",
                      cwd=tmp_path, cache=tmp_path / "cache", env=faked(CUDA_VISIBLE_DEVICES=MIG, **extra))
    logs = {cell.name: (cell / "train.log").read_text() for cell in sorted((tmp_path / "s").glob("*placement=*"))}
    return proc, logs


@pytest.mark.slow
def test_a_mig_sweep_is_warm_started_and_every_cell_is_ok(tmp_path):
    proc, logs = sweep(tmp_path)
    assert summary_line(proc.stdout) == "2 cells: 2 ok", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(logs) == 2 and all(WARM_START_MARK in log and BAD_FORK not in log for log in logs.values())


@pytest.mark.slow
def test_a_cell_forked_from_a_marked_warm_trainer_runs_again_cold_once_and_is_ok(tmp_path):
    proc, logs = sweep(tmp_path, POSENC_FAKE_CUDA_AT_IMPORT="1")  # something touched CUDA in it anyway
    assert summary_line(proc.stdout) == "2 cells: 2 ok", proc.stdout[-2000:] + proc.stderr[-2000:]
    first, second = logs.values()
    why = [line for line in first.splitlines() if line.startswith("posenc: fairseq-train: the warm trainer's fork")]
    assert len(why) == 1 and BAD_FORK in why[0] and "runs again cold, once" in why[0]
    assert first.index(WARM_START_MARK) < first.index(BAD_FORK) < first.index(why[0])
    assert "decoded test" in first.split(why[0])[1]  # the cold rerun trained and decoded
    assert WARM_START_MARK not in second and BAD_FORK not in second  # the next cell started cold
    assert f"a forked trainer failed ({BAD_FORK}); the trainer starts cold" in proc.stderr


def test_importing_the_warm_trainer_leaves_the_importers_gpus_alone():
    """Only the warm trainer's own process hides the GPUs; a module that imports it (a test, the
    offline GPU check) keeps its CUDA_VISIBLE_DEVICES."""
    code = "import os, posenc.trainer.warm; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(CUDA_VISIBLE_DEVICES="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "'1'", proc.stdout + proc.stderr[-2000:]
