"""The GPU path without a GPU (issue 57, section 2): cells spread over the GPUs, a shared GPU's other
refusals treated as out of memory, Exclusive_Process GPUs one cell each, MIG instances and nodes
without nvidia-smi given slots, CUDA's device order pinned, and torch's device count asked once per
environment. nvidia-smi, torch's count and the error strings are faked; their texts are the drivers'."""

import os
import sys
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from posenc.harness import machine
from posenc.harness.config.precision import check_hardware
from posenc.harness.launch import parallel, sharing
from posenc.harness.launch.parallel import JOBLIB, cell_resources, gpu_slots, visible_gpus
from posenc.harness.run.failures import gpu_out_of_memory
from posenc.harness.run.step import StepFailed, run_step
from project import compose_cfg

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")

# nvidia-smi -L on an A100 node with its first GPU split into two MIG instances (the driver's layout).
MIG_SMI = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5b1c1e-0000-0000-0000-000000000000)\n"
           "  MIG 3g.40gb     Device  0: (UUID: MIG-aaaaaaaa-1111-2222-3333-444444444444)\n"
           "  MIG 1g.10gb     Device  1: (UUID: MIG-bbbbbbbb-1111-2222-3333-444444444444)\n"
           "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-6e6c2d2f-0000-0000-0000-000000000000)\n")


def fake_smi(tmp_path, monkeypatch, listing="", modes=""):
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\ncase \"$1\" in -L) printf '%s' '{listing}';; "
                      f"--query-gpu=index,compute_mode) printf '%s' '{modes}';; esac\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")


def test_four_cells_on_two_gpus_spread_two_and_two(tmp_path):
    """First-fit put all four on GPU 0 with cells_per_gpu=8; least loaded first gives two each."""
    with gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=8) as a, gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=8) as b, \
         gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=8) as c, gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=8) as d:
        assert sorted(a + b + c + d) == ["0", "0", "1", "1"]


def test_a_workers_next_cell_stays_on_the_gpu_it_had(tmp_path):
    """Both GPUs free again: the worker that last ran on GPU 1 takes GPU 1 (its warm trainer's), not GPU 0."""
    with gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=2) as other:
        assert other == ["0"]
        with gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=2) as mine:
            assert mine == ["1"]  # the least loaded
    parallel._LAST_HELD[str(tmp_path)] = ["1"]  # this worker's last cell (the outer one above was another's)
    with gpu_slots(tmp_path, ["0", "1"], 1, per_gpu=2) as again:
        assert again == ["1"]


BUSY = "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"
CUBLAS = "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"


@pytest.mark.parametrize("error", [BUSY, CUBLAS])
def test_a_shared_gpus_other_refusals_count_as_out_of_memory(tmp_path, error):
    code = f"print('Traceback (most recent call last):'); print({error!r}); raise SystemExit(1)"
    with pytest.raises(StepFailed) as failed:
        run_step("fairseq-train", [sys.executable, "-c", code], tmp_path / "train.log")
    assert gpu_out_of_memory(str(failed.value))  # so run_sharing runs the cell again alone
    assert not gpu_out_of_memory("fairseq-train exited with status 1: ValueError: bad --arch")


def joblib_cfg(*overrides):
    return compose_cfg("experiment=table4", "hydra/launcher=joblib", "hydra.launcher.n_jobs=8", *overrides)


def test_an_exclusive_process_gpu_takes_one_cell(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, modes="0, Default\n1, Exclusive_Process\n")
    assert machine.exclusive_gpus() == ["1"]
    cfg = joblib_cfg("runtime.cells_per_gpu=4")
    share = sharing.decide(cfg, cfg.hydra.launcher, cores=16, environ={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert share.cells_per_gpu == 1 and "GPU 1 in Exclusive_Process" in share.why
    fine = sharing.decide(cfg, cfg.hydra.launcher, cores=16, environ={"CUDA_VISIBLE_DEVICES": "0"})
    assert fine.cells_per_gpu == 4  # GPU 0 is in Default mode


def test_mig_instances_are_devices_by_uuid(tmp_path, monkeypatch):
    assert machine.cuda_devices(MIG_SMI) == ["MIG-aaaaaaaa-1111-2222-3333-444444444444",
                                            "MIG-bbbbbbbb-1111-2222-3333-444444444444", "1"]
    assert machine.gpu_names(machine.smi_lines(MIG_SMI)) == ["NVIDIA A100-SXM4-80GB"] * 2
    fake_smi(tmp_path, monkeypatch, listing=MIG_SMI)
    assert len(visible_gpus({})) == 3


def test_without_nvidia_smi_the_slots_come_from_torchs_count(tmp_path, monkeypatch):
    """No nvidia-smi, no CUDA_VISIBLE_DEVICES: cells take a GPU each of those torch counts (in a child),
    with CUDA's order pinned to nvidia-smi's, instead of all landing on cuda:0 at once."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setattr(machine, "cuda_device_count", lambda env=None: 2)
    assert visible_gpus() == ["0", "1"]
    cell = SimpleNamespace(gpus=1, environment={})
    launcher = OmegaConf.create({"_target_": JOBLIB, "n_jobs": 2})
    with cell_resources(cell, launcher, 2, tmp_path) as one, cell_resources(cell, launcher, 2, tmp_path) as two:
        assert {one["CUDA_VISIBLE_DEVICES"], two["CUDA_VISIBLE_DEVICES"]} == {"0", "1"}
        assert one["CUDA_DEVICE_ORDER"] == two["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_torchs_device_count_is_asked_once_per_environment(monkeypatch):
    """precision=fp16's check before every cell: one child per environment, not one per cell."""
    asked = []

    def child(argv, **kw):
        asked.append(kw["env"].get("CUDA_VISIBLE_DEVICES"))
        return SimpleNamespace(stdout="1\n")

    monkeypatch.setattr(machine.subprocess, "run", child)
    monkeypatch.setattr(machine, "_counted", {})
    cell = SimpleNamespace(gpus=1, precision="fp16")
    for _ in range(5):
        check_hardware(cell, {"CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin"})
    check_hardware(cell, {"CUDA_VISIBLE_DEVICES": "1", "PATH": "/usr/bin"})
    check_hardware(cell, {"CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin", "WANDB_MODE": "offline"})  # not a key
    assert asked == ["0", "1"]
    monkeypatch.setattr(machine.subprocess, "run", lambda argv, **kw: SimpleNamespace(stdout="0\n"))
    with pytest.raises(Exception, match="needs 1 CUDA device"):
        check_hardware(cell, {"CUDA_VISIBLE_DEVICES": ""})


def test_the_record_names_the_gpu_the_cell_ran_on():
    """Index and UUID from the slot's CUDA_VISIBLE_DEVICES and nvidia-smi -L (an index, a MIG UUID)."""
    from posenc.harness.run.lifecycle import gpu_fields
    cuda = {"device": "cuda: NVIDIA A100-SXM4-80GB x1"}
    listing = MIG_SMI
    assert machine.gpu_identity("1", listing) == {"gpu_index": "1",
                                                  "gpu_uuid": "GPU-6e6c2d2f-0000-0000-0000-000000000000"}
    mig = "MIG-bbbbbbbb-1111-2222-3333-444444444444"
    assert machine.gpu_identity(mig, listing) == {"gpu_index": "0", "gpu_uuid": mig}
    assert machine.gpu_identity(None, listing) == {}  # two GPUs, CUDA's order: cannot tell which
    assert gpu_fields({"device": "cpu"}, {"CUDA_VISIBLE_DEVICES": "1"}) == {}
    from posenc.cells.record import Record
    record = Record()
    record.update(dict(cuda, **machine.gpu_identity("1", listing)))
    assert record.gpu_index == "1" and record.gpu_uuid.startswith("GPU-6e6c")


def test_the_calibrated_estimate_stays_above_the_measured_peak_with_a_margin():
    """fconv_table4 fp16 at 4,000 tokens (the tighter of the two H200 measurements): the estimate, made
    here on the CPU as the launcher makes it, above results/h200_synthetic.md's peak by a quarter, and
    well under the uncalibrated count that left GPUs under-packed."""
    import re
    from pathlib import Path

    from posenc.trainer import memory
    page = (Path(__file__).resolve().parents[1] / "results" / "h200_synthetic.md").read_text()
    row = next(line for line in page.splitlines() if "model=fconv_table4" in line)
    peak = float(re.search(r"peak memory ([\d.]+) GiB", row).group(1))
    parts = memory.estimate("posenc_fconv_table4", 1000, 4000, optimizer_buffers=memory.OPTIMIZER_BUFFERS["nag"])
    calibrated = memory.training_gib(parts, half=True)
    whole = (parts["half_state"] + parts["activations"] / 2) / memory.GIB
    assert 1.25 * peak <= calibrated < whole


def test_a_one_gpu_cell_records_the_first_of_the_gpus_it_was_shown(monkeypatch):
    from posenc.harness.run.lifecycle import gpu_fields
    monkeypatch.setattr(machine, "smi", lambda *args: MIG_SMI)
    one = gpu_fields({"device": "cuda: NVIDIA A100-SXM4-80GB x1"}, {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert one == {"gpu_index": "1", "gpu_uuid": "GPU-6e6c2d2f-0000-0000-0000-000000000000"}
    two = gpu_fields({"device": "cuda: NVIDIA A100-SXM4-80GB x2"}, {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert two["gpu_index"] == "1,0"
