"""What a resumed trainer restores beyond fairseq's checkpoint (``posenc.trainer.loop_state``), against
fairseq's and torch's own objects; when it calls a resume exact (``posenc.trainer.exactness``); and that
``--posenc-deterministic`` switches the trainer's process to deterministic kernels
(``posenc.trainer.deterministic``). The end-to-end resumes are tests/test_exact_resume.py's."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler
from omegaconf import OmegaConf

from posenc.trainer import deterministic, exactness, loop_state
from posenc.trainer.stop import RESUME_VERSION


def fake_trainer(**parts):
    """What loop_state reads of fairseq's Trainer: its schedule (with torch's plateau inside) and optimizer."""
    return SimpleNamespace(lr_scheduler=SimpleNamespace(lr_scheduler=parts.get("plateau")),
                           optimizer=SimpleNamespace(scaler=parts.get("scaler")))


@pytest.fixture
def early_stopping():
    """fairseq_cli.train's should_stop_early, its counters as this process had them afterwards."""
    stop = loop_state.early_stopping()
    kept = {key: getattr(stop, key) for key in loop_state.EARLY_STOP_KEYS if hasattr(stop, key)}
    yield stop
    for key in loop_state.EARLY_STOP_KEYS:
        if hasattr(stop, key):
            delattr(stop, key)
    for key, value in kept.items():
        setattr(stop, key, value)


def resumed_in_a_new_process(trainer_then, new_trainer):
    """What a checkpoint of ``trainer_then`` holds, restored into ``new_trainer`` (the process's
    early-stopping counters forgotten in between, as a new process has none)."""
    saved = loop_state.capture(trainer_then)
    stop = loop_state.early_stopping()
    for key in loop_state.EARLY_STOP_KEYS:
        if hasattr(stop, key):
            delattr(stop, key)
    loop_state.restore(new_trainer, saved)


# --- fp16's loss scaler ------------------------------------------------------------------------------
OVERFLOWS = {2, 7}


def step(scaler: DynamicLossScaler, i: int) -> float:
    """One update as FP16Optimizer takes it: an overflow check of the gradients' norm, then the update."""
    try:
        scaler.check_overflow(float("inf") if i in OVERFLOWS else 1.0)
        scaler.update()
    except OverflowError:
        pass
    return scaler.loss_scale


def test_the_loss_scalers_counters_carry_over_a_resume(early_stopping):
    scaler = DynamicLossScaler(init_scale=16.0, scale_window=3)
    uninterrupted = [step(scaler, i) for i in range(14)]
    first = DynamicLossScaler(init_scale=16.0, scale_window=3)
    before = [step(first, i) for i in range(5)]
    again, fairseqs = DynamicLossScaler(init_scale=2.0, scale_window=3), DynamicLossScaler(scale_window=3)
    resumed_in_a_new_process(fake_trainer(scaler=first), fake_trainer(scaler=again))
    fairseqs.loss_scale = first.loss_scale  # what fairseq's own checkpoint restores: the scale alone
    assert before + [step(again, i) for i in range(5, 14)] == uninterrupted
    assert before + [step(fairseqs, i) for i in range(5, 14)] != uninterrupted  # the counters matter


# --- the plateau schedule ----------------------------------------------------------------------------
LOSSES = [5.0, 4.0, 4.1, 4.05, 3.0, 3.1, 3.2, 3.15, 2.0, 2.2]


def plateau(lr=0.25):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1, factor=0.1)


def lrs(schedule, losses) -> list:
    out = []
    for loss in losses:
        schedule.step(loss)
        out.append(schedule.optimizer.param_groups[0]["lr"])
    return out


def test_the_plateau_schedules_counters_carry_over_a_resume(early_stopping):
    uninterrupted = lrs(plateau(), LOSSES)
    first = plateau()
    before = lrs(first, LOSSES[:3])
    lr = first.optimizer.param_groups[0]["lr"]  # (the optimizer's state in fairseq's checkpoint)
    again, fairseqs = plateau(lr), plateau(lr)
    resumed_in_a_new_process(fake_trainer(plateau=first), fake_trainer(plateau=again))
    fairseqs.best, fairseqs.last_epoch = first.best, first.last_epoch  # what fairseq saves of it
    assert before + lrs(again, LOSSES[3:]) == uninterrupted
    assert before + lrs(fairseqs, LOSSES[3:]) != uninterrupted  # num_bad_epochs matters


def test_an_epochs_last_checkpoint_leaves_its_lr_step_pending():
    def itr(epoch, at, version=2):
        return {"train_iterator": {"version": version, "epoch": epoch, "iterations_in_epoch": at}}
    assert loop_state.pending_epoch_end(itr(4, 0)) == 3  # saved at epoch 3's end: the iterator points at 4
    assert loop_state.pending_epoch_end(itr(4, 2)) is None  # inside epoch 4
    assert loop_state.pending_epoch_end(itr(1, 0)) is None and loop_state.pending_epoch_end(itr(4, 0, 1)) is None
    steps = []
    trainer = SimpleNamespace(lr_step=lambda epoch, loss: steps.append((epoch, loss)))
    assert loop_state.replay_epoch_end(trainer, {**itr(4, 0), "val_loss": 3.5}) == 3 and steps == [(3, 3.5)]


# --- early stopping ----------------------------------------------------------------------------------
VALID = [3.0, 2.0, 2.5, 2.4, 1.9, 2.0, 2.1]
PATIENCE = OmegaConf.create({"checkpoint": {"patience": 2, "maximize_best_checkpoint_metric": False}})


def test_early_stoppings_counter_carries_over_a_resume(early_stopping):
    for key in loop_state.EARLY_STOP_KEYS:
        if hasattr(early_stopping, key):
            delattr(early_stopping, key)
    uninterrupted = [early_stopping(PATIENCE, loss) for loss in VALID]
    for key in loop_state.EARLY_STOP_KEYS:
        delattr(early_stopping, key)
    before = [early_stopping(PATIENCE, loss) for loss in VALID[:4]]
    resumed_in_a_new_process(fake_trainer(), fake_trainer())
    assert uninterrupted[-1] and before + [early_stopping(PATIENCE, loss) for loss in VALID[4:]] == uninterrupted
    trainer = SimpleNamespace(cfg=OmegaConf.create({"optimization": {"max_update": 0, "stop_time_hours": 0},
                                                    **PATIENCE}), get_num_updates=lambda: 30)
    assert exactness.finished_reason(trainer) == "early_stop"  # the validation that stopped it was saved


# --- exactness ---------------------------------------------------------------------------------------
def trainer_on(device="cpu", world=1, schedule="inverse_sqrt", max_update=0, updates=10):
    cfg = OmegaConf.create({"lr_scheduler": {"_name": schedule}, "checkpoint": {"patience": 0},
                            "optimization": {"max_update": max_update, "stop_time_hours": 0}})
    return SimpleNamespace(cfg=cfg, optimizer=object(), data_parallel_world_size=world,
                           device=SimpleNamespace(type=device), get_num_updates=lambda: updates)


def saved_by(trainer, cuda=()):
    return {"version": RESUME_VERSION, "cuda": list(cuda), **exactness.process_state(trainer)}


def test_a_resume_is_exact_only_where_it_trains_as_the_saving_process_did(monkeypatch):
    cpu = trainer_on()
    assert exactness.inexact_reasons(cpu, saved_by(cpu)) == []
    assert exactness.inexact_reasons(cpu, None) == [
        "its checkpoint lacks the random states: written by an older version"]
    assert exactness.inexact_reasons(cpu, {**saved_by(cpu), "version": 1}) == [
        f"its checkpoint holds resume state version 1, this trainer restores version {RESUME_VERSION} "
        "(written by another version)"]
    assert exactness.inexact_reasons(cpu, saved_by(trainer_on(world=2))) == [
        "saved by 2 training processes, resumed by 1"]
    assert exactness.inexact_reasons(trainer_on(schedule="cosine"), saved_by(cpu)) == [
        "lr_scheduler cosine is not one whose resume posenc restores and checks (fixed, inverse_sqrt, "
        "reduce_lr_on_plateau)"]
    gpu = trainer_on("cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert exactness.inexact_reasons(gpu, saved_by(cpu)) == [
        "saved on cpu, resumed on cuda",
        "trained on a GPU without runtime.deterministic=true: its kernels do not repeat bit for bit"]
    monkeypatch.setattr(deterministic, "enabled", lambda: True)  # the deterministic GPU mode, saved and resumed in
    assert exactness.inexact_reasons(gpu, saved_by(gpu, cuda=[0])) == []
    assert exactness.inexact_reasons(gpu, saved_by(gpu, cuda=[0, 0])) == [
        "the CUDA generators were saved for 2 devices, 1 are visible: not restored"]


def test_a_checkpoint_at_the_update_cap_is_a_finished_training():
    assert exactness.finished_reason(trainer_on(max_update=10, updates=10)) == "max_update"
    assert exactness.finished_reason(trainer_on(max_update=12, updates=10)) == ""


# --- the deterministic mode --------------------------------------------------------------------------
PROBE = """
import json, sys
import posenc.trainer.train as entry
from fairseq_cli import train

def main(cfg, **kwargs):  # instead of fairseq-train's: what the training process runs with
    import os, torch
    json.dump({"algorithms": torch.are_deterministic_algorithms_enabled(), "cudnn": torch.backends.cudnn.deterministic,
               "benchmark": torch.backends.cudnn.benchmark, "cublas": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
               "kwargs": sorted(kwargs)}, open(sys.argv[1], "w"))

train.main = main
entry.main(sys.argv[2:])
"""


@pytest.mark.parametrize("flag", [False, True])
def test_the_trainer_switches_its_process_to_deterministic_kernels_when_asked(tmp_path, flag):
    out = tmp_path / "seen.json"
    argv = ["/no/data", "--task", "translation", "--arch", "fconv", "--cpu", "--optimizer", "adam"]
    env = {k: v for k, v in os.environ.items() if k != deterministic.CUBLAS_VARIABLE}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(out), *argv, *([deterministic.FLAG] if flag else [])],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert seen == {"algorithms": flag, "cudnn": flag, "benchmark": False, "kwargs": [],
                    "cublas": deterministic.CUBLAS_CONFIG if flag else None}
