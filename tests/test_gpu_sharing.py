"""Several cells on one GPU (issue 47): slots for a share of a GPU, ``auto`` from the memory estimate
and the cores, a bad share refused in one line before anything starts, a cell that runs out of GPU
memory beside others run again alone, and the line that says at a sweep's start how many share."""

import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from posenc.cells.record import Record
from posenc.harness.config.environment import cells_per_gpu
from posenc.harness.errors import ConfigError
from posenc.harness.launch import sharing
from posenc.harness.launch.parallel import JOBLIB, cell_resources, gpu_slots
from posenc.harness.run.failures import SKIP_REASON, gpu_out_of_memory, skipped_batch
from posenc.harness.run.step import StepFailed, run_step
from project import compose_cell, compose_cfg

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def joblib(n_jobs):
    return OmegaConf.create({"_target_": JOBLIB, "n_jobs": n_jobs})


def test_four_cells_share_the_one_gpu_cuda_visible_devices_shows_and_a_fifth_waits(tmp_path, monkeypatch):
    """Five joblib cells of gpus=1, runtime.cells_per_gpu=4, on the one GPU the environment shows:
    four run at once on it, each with its share of the cores; the fifth starts when one of them ends."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    cell = compose_cell("gpus=1", "runtime.cells_per_gpu=4")
    assert cell.cells_per_gpu == 4 and sharing.cells_on_each_gpu(cell, tmp_path) == 4  # no sweep decision: its own
    inside, seen, lock = set(), [], threading.Lock()
    release = {name: threading.Event() for name in "abcde"}

    def one(name):
        with cell_resources(cell, joblib(5), 5, tmp_path, per_gpu=4) as env:
            with lock:
                inside.add(name)
                seen.append((name, set(inside), env))
            release[name].wait(20)
            with lock:
                inside.discard(name)

    threads = {name: threading.Thread(target=one, args=(name,)) for name in "abcde"}
    for name in "abcd":
        threads[name].start()
    deadline = time.monotonic() + 20
    while len(inside) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    threads["e"].start()
    time.sleep(3)  # longer than gpu_slots' poll: the fifth had its chances
    assert inside == set("abcd")  # four side by side, the fifth waiting
    release["b"].set()
    threads["b"].join(20)
    deadline = time.monotonic() + 20
    while "e" not in inside and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "e" in inside and "b" not in inside  # b's slot
    for name in "acde":
        release[name].set()
    for t in threads.values():
        t.join(20)
    assert len(seen) == 5 and all(env["CUDA_VISIBLE_DEVICES"] == "3" for _, _, env in seen)
    assert all(env["OMP_NUM_THREADS"] for _, _, env in seen)  # each its share of the cores


def test_a_cell_alone_waits_for_the_cells_on_its_gpu_and_keeps_new_ones_off(tmp_path):
    with gpu_slots(tmp_path, ["0"], 1, per_gpu=2, poll_s=0.05) as first:
        assert first == ["0"]
        got = []
        alone = threading.Thread(target=lambda: got.append(_hold(tmp_path, alone=True)))
        alone.start()
        time.sleep(0.5)
        assert not got  # one cell still on the GPU
        newcomer = threading.Thread(target=lambda: got.append(_hold(tmp_path, alone=False)))
        newcomer.start()
        time.sleep(0.5)
        assert not got  # a free slot, but a cell waits to run alone there: it is not starved
    alone.join(10), newcomer.join(10)
    assert got == ["alone", "shared"]


def _hold(lock_dir, alone):
    with gpu_slots(lock_dir, ["0"], 1, per_gpu=2, poll_s=0.05, alone=alone):
        time.sleep(0.3)
    return "alone" if alone else "shared"


@pytest.mark.parametrize("value", [0, -1, 1.5, "abc", True, "", None])
def test_a_share_that_cannot_be_is_refused_in_one_line(value):
    with pytest.raises(ConfigError) as err:
        cells_per_gpu(value)
    assert str(err.value) == (f"runtime.cells_per_gpu={value!r} is not allowed; allowed: auto (as many as fit) "
                              "or a whole number >= 1 of cells that share each GPU")
    assert cells_per_gpu("auto") == "auto" and cells_per_gpu(4) == 4 and cells_per_gpu("2") == 2


@pytest.mark.parametrize("value,shown", [("1.5", "1.5"), ("0", "0"), ("abc", "'abc'")])  # as Hydra parses them
def test_posenc_run_refuses_a_bad_share_before_anything_starts(tmp_path, value, shown):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([str(BIN / "posenc-run"), "-m", "experiment=table4", f"runtime.cells_per_gpu={value}",
                           "hydra/launcher=joblib", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"posenc-run: error: runtime.cells_per_gpu={shown} is not allowed; allowed: auto (as many as fit) or a "
        "whole number >= 1 of cells that share each GPU"]
    assert not sweep.exists()  # no cell started


def test_gpus_as_ray_writes_a_share_points_to_cells_per_gpu():
    from posenc.harness.config.precision import check_gpu_settings
    with pytest.raises(ConfigError, match=r"^gpus=0.25 is not allowed; .*; to share a GPU between cells, "
                                          r"runtime.cells_per_gpu=4$"):
        check_gpu_settings(SimpleNamespace(precision="fp32", gpus=0.25))


def test_auto_packs_as_many_as_memory_cores_and_workers_allow():
    # fconv_table4's estimate (2.7 GiB fp32) + the context: 4.7 GiB; an H200's 139 GiB, 90% of it: 26.
    assert sharing.fit_share(4.7, [139.0], cores=64, gpus=1, workers=64).cells_per_gpu == 26
    by_cores = sharing.fit_share(4.7, [139.0], cores=16, gpus=1, workers=16)
    assert by_cores.cells_per_gpu == 16 and "limited by the cores" in by_cores.why
    assert sharing.fit_share(4.7, [139.0, 139.0], cores=16, gpus=2, workers=16).cells_per_gpu == 8
    assert sharing.fit_share(4.7, [139.0, 20.0], cores=64, gpus=2, workers=64).cells_per_gpu == 3  # the fullest GPU
    assert sharing.fit_share(4.7, [139.0], cores=64, gpus=1, workers=2).cells_per_gpu == 2  # n_jobs=2
    tight = sharing.fit_share(30.0, [16.0], cores=64, gpus=1, workers=64)
    assert tight.cells_per_gpu == 1 and "limited by memory" in tight.why  # not even one fits: one, alone


def test_auto_decides_from_the_cells_memory_estimate_and_the_cores(monkeypatch):
    """``decide`` asks the estimate of the sweep's own model (a child running posenc.trainer.memory) and the
    free memory of the GPUs it may use; the estimate is the one scripts/estimate_memory.py prints."""
    cfg = compose_cfg("experiment=table4", "precision=fp16", "hydra/launcher=joblib", "hydra.launcher.n_jobs=16")
    need = sharing.training_need_gib(cfg)
    proc = subprocess.run([sys.executable, "scripts/estimate_memory.py", "--arch", "posenc_fconv_small", "--vocab",
                           str(cfg.data.subword_size), "--max-tokens", str(cfg.budget.max_tokens),
                           "--optimizer", "adam", "--json"], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[1])
    assert abs(need - sharing.CONTEXT_GIB - json.loads(proc.stdout.splitlines()[-1])["training_gib_half"]) < 1e-9
    assert 0 < need - sharing.CONTEXT_GIB < 1  # a 0.6M-parameter model's batch: far under a GiB
    share = sharing.decide(cfg, cfg.hydra.launcher, memory=lambda: [(40.0, 80.0)], need=lambda _: need, cores=6,
                           environ={"CUDA_VISIBLE_DEVICES": "0"})
    assert share.cells_per_gpu == 6 and "limited by the cores" in share.why
    none = dict(memory=lambda: [(40.0, 80.0)], need=lambda _: need, cores=6)
    assert sharing.decide(cfg, cfg.hydra.launcher, environ={"CUDA_VISIBLE_DEVICES": ""}, **none) is None  # no GPU
    def no_estimate(_):
        raise ConfigError("the memory estimate of model.arch=x failed (boom): one cell a GPU; "
                          "runtime.cells_per_gpu=N sets it")
    fallback = sharing.decide(cfg, cfg.hydra.launcher, memory=lambda: [(40.0, 80.0)], need=no_estimate, cores=6,
                              environ={"CUDA_VISIBLE_DEVICES": "0"})
    assert fallback == sharing.Share(1, "auto: the memory estimate of model.arch=x failed (boom): one cell a GPU; "
                                        "runtime.cells_per_gpu=N sets it")  # said, never a stopped sweep
    cpu = compose_cfg("experiment=table4", "gpus=0", "hydra/launcher=joblib", "hydra.launcher.n_jobs=16")
    assert sharing.decide(cpu, cpu.hydra.launcher, environ={"CUDA_VISIBLE_DEVICES": "0"}, **none) is None
    basic = compose_cfg("experiment=table4")
    assert sharing.decide(basic, basic.hydra.launcher, environ={"CUDA_VISIBLE_DEVICES": "0"}, **none) is None


def test_the_sweep_says_at_its_start_how_many_share_each_gpu(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(sharing.machine, "gpu_memory_gib", lambda: [(139.8, 139.8)])
    monkeypatch.setattr(sharing, "training_need_gib", lambda cfg: 2.5)
    monkeypatch.setattr(sharing, "machine_cores", lambda: 16)
    cfg = compose_cfg("experiment=table4", "hydra/launcher=joblib", "hydra.launcher.n_jobs=12",
                      f"hydra.sweep.dir={tmp_path}")
    sharing.GpuSharing().on_multirun_start(cfg)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("posenc-run: 12 cell(s) share each GPU (auto, limited by the launcher's workers: "
                           "a cell needs about 2.5 GiB")
    assert json.loads(sharing.share_file(tmp_path).read_text())["cells_per_gpu"] == 12
    cell = compose_cell("gpus=1")  # runtime.cells_per_gpu=auto: the sweep's decision
    assert sharing.cells_on_each_gpu(cell, tmp_path) == 12
    plain = compose_cfg("experiment=table4", f"hydra.sweep.dir={tmp_path}")  # one cell at a time: no share
    sharing.GpuSharing().on_multirun_start(plain)
    assert not sharing.share_file(tmp_path).exists() and sharing.cells_on_each_gpu(cell, tmp_path) == 1


# --- out of memory beside others: run again alone ---------------------------------------------------

FAKE_OOM = """
import sys
print("2026-12-03 10:12:09 | INFO | train_inner | {\\"epoch\\": 1, \\"update\\": 1.5, \\"loss\\": \\"9.1\\"}")
print("Traceback (most recent call last):")
print('  File "fairseq/trainer.py", line 1015, in train_step')
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
      "139.80 GiB of which 1.20 GiB is free.")
sys.exit(1)
"""


def test_cuda_out_of_memory_is_recognised_in_the_childs_log_and_exit(tmp_path):
    with pytest.raises(StepFailed) as failed:
        run_step("fairseq-train", [sys.executable, "-c", FAKE_OOM], tmp_path / "train.log")
    assert str(failed.value).startswith("out of memory: torch.OutOfMemoryError: CUDA out of memory.")
    assert gpu_out_of_memory(str(failed.value))
    assert not gpu_out_of_memory("fairseq-train was killed by SIGKILL (out of memory? the kernel's OOM killer "
                                 "sends SIGKILL)")  # the host's memory, not the GPU's: alone would not help
    assert skipped_batch("2026-12-03 | WARNING | fairseq.trainer | attempting to recover from OOM in "
                         "forward/backward pass") == SKIP_REASON and gpu_out_of_memory(SKIP_REASON)


def test_a_cell_out_of_gpu_memory_beside_others_runs_again_alone(tmp_path, monkeypatch):
    """The first run (sharing) fails with CUDA's OOM; the second runs with its GPU to itself (no other
    cell can take a slot meanwhile) and is what the job gets."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cell = compose_cell("gpus=1", "runtime.cells_per_gpu=3")
    runs, said = [], []

    def run(env, shared):
        other = []
        probe = threading.Thread(target=lambda: other.append(_try_slot(tmp_path / ".gpu-slots", 3)))
        probe.start(), probe.join(5)
        runs.append((env["CUDA_VISIBLE_DEVICES"], shared, other[0]))
        if len(runs) == 1:
            return SimpleNamespace(record=Record(status="failed", error="out of memory: torch.OutOfMemoryError: "
                                                 "CUDA out of memory. Tried to allocate 2.00 GiB (log: x)"))
        return SimpleNamespace(record=Record(status="ok"))

    ran = sharing.run_sharing(cell, joblib(3), 3, tmp_path, run, say=said.append)
    assert ran.record.status == "ok"
    assert runs == [("0", True, True), ("0", False, False)]  # shared: a slot left for others; alone: none
    assert said == ["out of GPU memory beside 2 other cell(s): running it again alone on its GPU"]
    other_failure = SimpleNamespace(record=Record(status="failed", error="fairseq-train exited with status 1: x"))
    calls = []
    sharing.run_sharing(cell, joblib(3), 3, tmp_path, lambda env, shared: calls.append(shared) or other_failure)
    assert calls == [True]  # any other failure is the cell's own: not run again


def test_a_slurm_task_cell_out_of_gpu_memory_beside_its_task_mates_runs_again_alone_after_them(tmp_path,
                                                                                                monkeypatch):
    """Two cells of one array task (cells_per_task=2) on the task's one GPU: both start at once; the one
    that runs out of GPU memory runs again with the GPU to itself only after the other finished. Its
    slots are the array task's own (other tasks of the array are on other GPUs)."""
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    task = OmegaConf.create({"_target_": "hydra_plugins.posenc_slurm_launcher.slurm_launcher.SlurmLauncher",
                             "cells_per_task": 2})
    cell = compose_cell("gpus=1")
    assert sharing.cells_on_each_gpu(cell, tmp_path, task) == 2
    events, both_in, mate_done = [], threading.Barrier(2, timeout=20), threading.Event()

    def oom_first(env, shared):
        events.append(("oom", env.get("CUDA_VISIBLE_DEVICES"), shared, mate_done.is_set()))
        if len(events) <= 2:
            both_in.wait()
            return SimpleNamespace(record=Record(status="failed", error="out of memory: torch.OutOfMemoryError: "
                                                 "CUDA out of memory. Tried to allocate 2.00 GiB (log: x)"))
        return SimpleNamespace(record=Record(status="ok"))

    def mate(env, shared):
        events.append(("mate", env.get("CUDA_VISIBLE_DEVICES"), shared, False))
        both_in.wait()
        time.sleep(3)  # longer than gpu_slots' poll: the other had its chances to start alone
        mate_done.set()
        return SimpleNamespace(record=Record(status="ok"))

    said, results = [], {}
    threads = [threading.Thread(target=lambda: results.update(oom=sharing.run_sharing(
                   cell, task, 2, tmp_path, oom_first, say=said.append))),
               threading.Thread(target=lambda: results.update(mate=sharing.run_sharing(cell, task, 2, tmp_path, mate)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results["oom"].record.status == "ok" and results["mate"].record.status == "ok"
    assert sorted(events[:2]) == [("mate", "0", True, False), ("oom", "0", True, False)]  # side by side
    assert events[2] == ("oom", "0", False, True)  # alone, once its task mate had finished
    assert said == ["out of GPU memory beside 1 other cell(s): running it again alone on its GPU",
                    "waiting for 1 alone GPU(s) of 1 (2 cells each)"]
    assert [p.name for p in (tmp_path / ".gpu-slots").iterdir()] == ["slurm-41"]


def test_cells_per_task_shares_nothing_outside_a_slurm_job_or_on_a_node_without_gpus(tmp_path, monkeypatch):
    task = OmegaConf.create({"_target_": "hydra_plugins.posenc_slurm_launcher.slurm_launcher.SlurmLauncher",
                             "cells_per_task": 2})
    cell = compose_cell("gpus=1")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with cell_resources(cell, task, 2, tmp_path) as env:
        assert "CUDA_VISIBLE_DEVICES" not in env  # the submitter's own process: no task, no slots
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with cell_resources(cell, task, 2, tmp_path) as env:
        assert env == {}  # a CPU node: the cells of the task share no GPU
    assert not (tmp_path / ".gpu-slots").exists()


def _try_slot(lock_dir, per_gpu):
    """Whether another cell could start on GPU 0 now (a slot free, nobody waiting to be alone)."""
    from posenc.harness.launch.parallel import _Slots
    slot = _Slots(Path(lock_dir), per_gpu).one_slot("0")
    if slot:
        slot.release()
    return slot is not None


FAKE_SKIP = """
import signal, sys, time
from posenc.trainer.stop import SAVE_AND_STOP, STOPPED_EXIT
signal.signal(SAVE_AND_STOP, lambda *a: sys.exit(STOPPED_EXIT))  # as posenc.trainer.train saves and stops
print("2026-12-03 10:12:09 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of memory.")
print("2026-12-03 10:12:09 | WARNING | fairseq.trainer | attempting to recover from OOM in forward/backward pass",
      flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("shared", [True, False])
def test_a_batch_fairseq_drops_stops_a_sharing_cell_and_its_checkpoints_go(tmp_path, shared):
    """Beside others, fairseq's own recovery (a dropped batch) would make another run than the cell's:
    the step stops, the record's error says why, and no checkpoint of it is resumed from. Alone, the
    line is fairseq's business as before."""
    from posenc.harness.run import lifecycle
    cell = compose_cell("gpus=1")
    cell = replace(cell, limits=replace(cell.limits, train_s=5 if not shared else 0))
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint_last.pt").write_bytes(b"after the dropped batch")
    progress = SimpleNamespace(say=lambda line: None)
    step = lifecycle.TrainStep([sys.executable, "-c", FAKE_SKIP], {}, lambda line: None, shared=shared)
    with pytest.raises(StepFailed) as failed:
        lifecycle.train(cell, tmp_path, progress, step)
    if shared:
        assert str(failed.value).startswith(f"fairseq-train stopped: {SKIP_REASON}") and gpu_out_of_memory(
            str(failed.value))
        assert not (tmp_path / "checkpoints").exists()  # a rerun alone starts afresh
    else:
        assert "time limit" in str(failed.value)  # nothing stopped it but its limit
        assert (tmp_path / "checkpoints" / "checkpoint_last.pt").exists()


def test_a_data_bins_vocabulary_is_its_dictionaries_as_fairseq_loads_them(reversal_corpus, tmp_path):
    """``data=binarized``: the estimate's vocabulary is the larger of DIR's two dictionaries (fairseq's own
    count, specials included), not the schema's subword size; a preset corpus keeps its subword size."""
    databin = tmp_path / "bin"
    shutil.copytree(reversal_corpus, databin)
    with open(databin / "dict.tgt.txt", "a") as f:  # separate dictionaries, the target's the larger
        f.writelines(f"extra{i} 1\n" for i in range(37))
    data = compose_cfg("data=binarized", f"data.dir={databin}", hydra=False).data
    default, table4 = compose_cfg(hydra=False).data, compose_cfg("experiment=table4", hydra=False).data
    gone = compose_cfg("data=binarized", f"data.dir={tmp_path / 'missing'}", hydra=False).data
    unset = compose_cfg("data=binarized", hydra=False).data  # data.dir ??? (refused by the sweep's own check)
    from fairseq.data import Dictionary  # after composing: importing fairseq fills Hydra's ConfigStore
    fairseqs = [len(Dictionary.load(str(databin / f"dict.{lang}.txt"))) for lang in ("src", "tgt")]
    assert fairseqs[1] > fairseqs[0] and sharing.vocabulary(data) == fairseqs[1]
    assert sharing.vocabulary(data) != default.subword_size
    assert sharing.vocabulary(table4) == table4.subword_size
    with pytest.raises(ConfigError, match=r"^the memory estimate cannot read the data-bin: data\.dir=.*missing: no "):
        sharing.vocabulary(gone)
    with pytest.raises(ConfigError, match=r"^the memory estimate cannot read the data-bin: data\.dir=None: no such "):
        sharing.vocabulary(unset)
