"""The pieces that let a cell survive interruptions, without running fairseq: durable writes,
resume decisions, reading resumed logs, failure reasons, time limits, the sweep's summary line,
the per-cell lock, signals to a running step."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from posenc import atomic
from posenc.cells.record import Record, inexact_resume
from posenc.harness.config.limits import step_limits
from posenc.harness.config.resolve import REDO_INEXACT, redo_setting
from posenc.harness.errors import ConfigError
from posenc.harness.fairseq_logs import (
    UNMARKED_RESUME,
    resume_exact,
    resume_inexact_reason,
    resumed_from,
    stopped_by,
    training_summary,
)
from posenc.harness.hashing import cell_hashes
from posenc.harness.run import resume
from posenc.harness.run.failures import exit_reason, non_finite_loss
from posenc.harness.sweep.summary import summarize
from posenc.trainer.stop import EXACT_RESUME_MARK, FINISHED_MARK, INEXACT_RESUME_MARK, RESUME_VERSION

REPO = Path(__file__).resolve().parents[1]


# --- durable, atomic files ---------------------------------------------------------------

def test_atomic_write_syncs_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("rename", Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic.write_json_atomic(tmp_path / "result.json", {"a": 1})
    assert events == [("fsync", "file"), ("rename", "result.json"), ("fsync", "dir")]
    assert json.loads((tmp_path / "result.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temp file left


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "table.md"
    atomic.write_text_atomic(target, "old\n")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        atomic.write_text_atomic(target, "new\n")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.md"]


def test_atomic_files_get_the_usual_permissions(tmp_path):
    atomic.write_text_atomic(tmp_path / "x", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o666 & ~umask


# --- resume decisions -------------------------------------------------------------------------

def cfg_of(**changes):
    """What resuming reads of a cell (its hashes), for a small config with ``changes``."""
    base = {"model": {"name": "fconv_small", "arch": "posenc_fconv_small"}, "budget": {"max_update": 20},
            "placement": "both", "pe": "learned", "seed": 1, "generation": {"beam": 5}, "redo": False,
            "runtime": {"threads": "auto"}, "keep_checkpoints": "best", "logger": {"name": "none"}}
    cfg = OmegaConf.create(base)
    for key, value in changes.items():
        OmegaConf.update(cfg, key, value)
    return SimpleNamespace(hashes=cell_hashes(cfg))


def fake_checkpoint(path: Path, whole=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"x" * 5000)
    if not whole:  # cut short, as by a kill during fairseq's copy or a full disk
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def test_a_cell_with_nothing_starts_afresh(tmp_path):
    assert resume.plan(tmp_path, cfg_of()).action == "fresh"


def test_an_unfinished_cell_resumes_from_its_last_checkpoint(tmp_path):
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_last.pt")
    plan = resume.plan(tmp_path, cfg)
    assert (plan.action, plan.message) == ("resume", "resuming from checkpoints/checkpoint_last.pt")
    # What only changes how the cell is scored or run keeps the checkpoints.
    for change in ({"generation.beam": 4}, {"runtime.threads": 1}, {"keep_checkpoints": "all"}, {"redo": True},
                   {"budget.step_timeout_min": 99}):
        assert resume.plan(tmp_path, cfg_of(**change)).action == "resume", change


def test_a_changed_configuration_starts_afresh_and_says_so(tmp_path):
    resume.begin_training(tmp_path, cfg_of())
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_last.pt")
    plan = resume.plan(tmp_path, cfg_of(**{"budget.max_update": 40}))
    assert plan.action == "fresh" and "configuration changed" in plan.message
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "state.json").exists()


def test_a_finished_training_is_scored_without_retraining(tmp_path):
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_best.pt")
    resume.finish_training(tmp_path, cfg, {"num_updates": 20, "valid_ppl": 9.5, "resumed_from_update": 12})
    plan = resume.plan(tmp_path, cfg_of(**{"generation.beam": 4}))
    assert plan.action == "score" and plan.training["num_updates"] == 20 and plan.training["resumed_from_update"] == 12


def test_a_training_that_ended_unnoticed_is_scored_not_resumed(tmp_path):
    """fairseq finished, but the harness was killed before it noted so: resuming would train one
    update more than asked, so the cell is scored as it is."""
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_best.pt")
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_last.pt")
    log = ["INFO | fairseq.trainer | Preparing to load checkpoint /c/checkpoint_last.pt",
           "INFO | fairseq.trainer | No existing checkpoint found /c/checkpoint_last.pt",
           rec("valid", 20, epoch=1, valid_loss="4.0", valid_ppl="16"), rec("train", 20, epoch=1)]
    (tmp_path / "train.log").write_text("\n".join(log) + "\n")
    assert resume.plan(tmp_path, cfg).action == "resume"
    (tmp_path / "train.log").write_text("\n".join(log + ["INFO | fairseq_cli.train | done training in 9.0 seconds"])
                                        + "\n")
    plan = resume.plan(tmp_path, cfg)
    assert plan.action == "score" and plan.training["num_updates"] == 20 and plan.training["valid_ppl"] == 16.0
    assert resume.read_state(tmp_path)["finished"]


def test_a_truncated_last_checkpoint_is_never_handed_to_fairseq(tmp_path):
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    saved = tmp_path / "checkpoints"
    fake_checkpoint(saved / "checkpoint_last.pt", whole=False)
    fake_checkpoint(saved / "checkpoint_3_40.pt")
    fake_checkpoint(saved / "checkpoint_2_20.pt")
    plan = resume.plan(tmp_path, cfg)
    assert plan.action == "resume" and "checkpoint_3_40.pt" in plan.message
    assert (saved / "checkpoint_last.pt").read_bytes() == (saved / "checkpoint_3_40.pt").read_bytes()
    # With nothing whole to resume from: afresh, saying why.
    (saved / "checkpoint_3_40.pt").unlink()
    (saved / "checkpoint_2_20.pt").unlink()
    fake_checkpoint(saved / "checkpoint_last.pt", whole=False)
    plan = resume.plan(tmp_path, cfg)
    assert plan.action == "fresh" and "damaged" in plan.message


def test_a_checkpoint_that_links_out_of_the_cell_is_not_loaded(tmp_path):
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    elsewhere = tmp_path / "elsewhere.pt"
    fake_checkpoint(elsewhere)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint_last.pt").symlink_to(elsewhere)
    assert resume.plan(tmp_path, cfg).action == "fresh"
    assert elsewhere.exists()  # the link goes, what it pointed to stays


def test_checkpoints_of_unknown_configuration_are_not_trusted(tmp_path):
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_last.pt")
    plan = resume.plan(tmp_path, cfg_of())
    assert plan.action == "fresh" and "without a record" in plan.message


# --- reading the log of a resumed training ----------------------------------------------------------

def rec(kind, updates, **values):
    key = {"train": "train_num_updates", "valid": "valid_num_updates", "train_inner": "num_updates"}[kind]
    return f"2026-01-01 | INFO | {kind} | " + json.dumps({key: str(updates), **values})


def test_a_resumed_log_counts_only_what_the_checkpoints_hold():
    log = [
        "INFO | fairseq.trainer | No existing checkpoint found /c/checkpoint_last.pt",
        rec("valid", 10, epoch=1, valid_loss="5.0", valid_ppl="32"),
        "INFO | Saved checkpoint /c/checkpoint_best.pt (epoch 1 @ 10 updates, score 5.0) (writing took 0.1 seconds)",
        rec("valid", 20, epoch=2, valid_loss="3.0", valid_ppl="8"),  # logged, then the run was killed before saving
        "INFO | fairseq.trainer | Loaded checkpoint /c/checkpoint_last.pt (epoch 1 @ 10 updates)",
        rec("valid", 20, epoch=2, valid_loss="4.0", valid_ppl="16"),
        rec("train", 20, epoch=2),
    ]
    assert resumed_from(log) == 10
    summary = training_summary(log)
    assert (summary["valid_ppl"], summary["num_updates"], summary["epochs"]) == (16.0, 20, 2)
    assert resumed_from(log[:3]) == 0


FRESH = "INFO | fairseq.trainer | No existing checkpoint found /c/checkpoint_last.pt"


def loaded(updates):
    return f"INFO | fairseq.trainer | Loaded checkpoint /c/checkpoint_last.pt (epoch 2 @ {updates} updates)"


def test_a_resume_is_exact_only_when_every_resume_restored_the_random_states():
    exact = [FRESH, loaded(10), f"{EXACT_RESUME_MARK} 10", loaded(15), f"{EXACT_RESUME_MARK} 15"]
    assert resume_exact(exact) is True and resume_exact([FRESH]) is None
    # One resume without the mark (an older version's), before or after an exact one: not exact.
    assert resume_exact([FRESH, loaded(10), loaded(15), f"{EXACT_RESUME_MARK} 15"]) is False
    assert resume_exact([*exact, loaded(18), f"{INEXACT_RESUME_MARK} 18 (its checkpoint lacks ...)"]) is False
    # A fresh start (redo, a changed configuration) forgets the earlier runs.
    assert resume_exact([FRESH, loaded(10), FRESH]) is None


def test_why_a_resume_was_inexact_is_read_from_the_trainers_line():
    gpu = "trained on a GPU without runtime.deterministic=true: its kernels do not repeat bit for bit"
    log = [FRESH, loaded(10), f"{EXACT_RESUME_MARK} 10", loaded(15), f"{INEXACT_RESUME_MARK} 15 ({gpu})",
           loaded(18)]
    assert resume_exact(log) is False
    assert resume_inexact_reason(log) == f"update 15: {gpu}; update 18: {UNMARKED_RESUME}"
    assert resume_inexact_reason(log[:3]) is None and resume_inexact_reason([FRESH]) is None


def test_a_record_without_resume_exact_that_was_resumed_counts_as_inexact():
    assert inexact_resume(Record.from_dict({"status": "ok", "resumed_from_update": 109}))  # written before issue 48
    assert not inexact_resume(Record.from_dict({"status": "ok", "resumed_from_update": 0}))
    assert not inexact_resume(Record.from_dict({"status": "ok", "resumed_from_update": 109, "resume_exact": True}))
    assert inexact_resume(Record.from_dict({"status": "ok", "resumed_from_update": 109, "resume_exact": False}))
    assert not inexact_resume(None)


def test_redo_takes_true_false_or_inexact_and_refuses_the_rest():
    assert (redo_setting(True), redo_setting(False), redo_setting("inexact")) == (True, False, REDO_INEXACT)
    for bad in ("yes", 1, "inexactly"):
        with pytest.raises(ConfigError, match=r"^redo=.* is not allowed; allowed: false, true .*inexact"):
            redo_setting(bad)


def test_redo_inexact_finds_the_cells_whose_training_was_or_would_be_resumed_inexactly(tmp_path):
    cfg = cfg_of()
    ok = {"status": "ok", "error": "", "bleu": 20.0}
    cells = {name: tmp_path / name for name in ("fresh", "exact", "old-record", "old-log", "old-checkpoint",
                                                "new-checkpoint")}
    for job_dir in cells.values():
        job_dir.mkdir()
    (cells["fresh"] / "result.json").write_text(json.dumps({**ok, "resumed_from_update": 0}))
    (cells["exact"] / "result.json").write_text(json.dumps({**ok, "resumed_from_update": 9, "resume_exact": True}))
    (cells["old-record"] / "result.json").write_text(json.dumps({**ok, "resumed_from_update": 9}))
    (cells["old-log"] / "train.log").write_text("\n".join([FRESH, loaded(9)]) + "\n")  # resumed by an old version
    for name in ("old-checkpoint", "new-checkpoint"):
        resume.begin_training(cells[name], cfg)
        fake_checkpoint(cells[name] / "checkpoints" / "checkpoint_last.pt")
    state = json.loads((cells["old-checkpoint"] / "state.json").read_text())
    del state["exact_resume"]  # checkpoints of a version before exact resume
    (cells["old-checkpoint"] / "state.json").write_text(json.dumps(state))
    why = {name: resume.inexact_training(job_dir) for name, job_dir in cells.items()}
    assert why == {"fresh": "", "exact": "", "old-record": "resumed inexactly from update 9",
                   "old-log": "its training was resumed inexactly",
                   "old-checkpoint": "its checkpoints were written without the random states an exact resume needs",
                   "new-checkpoint": ""}
    assert json.loads((cells["new-checkpoint"] / "state.json").read_text())["exact_resume"] == RESUME_VERSION
    # Checkpoints of the version before issue 58 (random states, not the loop's) and a record that says why.
    state["exact_resume"] = True
    (cells["old-checkpoint"] / "state.json").write_text(json.dumps(state))
    (cells["old-record"] / "result.json").write_text(json.dumps(
        {**ok, "resumed_from_update": 9, "resume_exact": False, "resume_inexact_reason": "update 9: saved on cpu"}))
    assert resume.inexact_training(cells["old-checkpoint"]) == "its checkpoints were written by another version of " \
                                                               "the trainer"
    assert resume.inexact_training(cells["old-record"]) == "resumed inexactly from update 9 (update 9: saved on cpu)"


# fairseq's own lines (fairseq_cli/train.py, should_stop_early / validate_and_save)
TIME_CAP = ("INFO | fairseq_cli.train | Stopping training due to cumulative_training_time: 0.0502 > "
            "stop_time_hours: 0.05 hour(s)")
UPDATE_CAP = "INFO | fairseq_cli.train | Stopping training due to num_updates: 20 >= max_update: 20"


def test_what_stopped_a_training_is_read_from_its_last_run():
    assert stopped_by([rec("train", 218, epoch=2), "done training in 9.0 seconds"]) == "max_epoch"
    assert stopped_by([rec("train", 150, epoch=2), TIME_CAP, "done training in 180.0 seconds"]) == "time_cap"
    assert stopped_by([rec("train", 20, epoch=1), UPDATE_CAP, "done training"]) == "max_update"
    # Both caps on the same update: the planned updates were reached, the time cap cut nothing short.
    assert stopped_by([UPDATE_CAP, TIME_CAP]) == "max_update"
    # A later run (resumed) starts its own account.
    resumed = [TIME_CAP, "INFO | fairseq.trainer | Preparing to load checkpoint /c/checkpoint_last.pt",
               rec("train", 218, epoch=2)]
    assert stopped_by(resumed) == "max_epoch"
    # What the plateau schedule's floor and early stopping log (fairseq_cli/train.py), and the trainer's
    # line for a training resumed where it had ended (killed after its last save).
    floor = ("INFO | fairseq_cli.train | stopping training because current learning rate (2.5e-05) is smaller than "
             "or equal to minimum learning rate (--stop-min-lr=0.0001)")
    early = "INFO | fairseq_cli.train | early stop since valid performance hasn't improved for last 3 runs"
    assert stopped_by([rec("train", 21, epoch=7), floor, "done training"]) == "stop_min_lr"
    assert stopped_by([early, "done training"]) == "early_stop"
    assert stopped_by([*resumed, f"{FINISHED_MARK} max_update (update 20)", "done training"]) == "max_update"
    assert stopped_by([f"{FINISHED_MARK} early_stop (update 20)"]) == "early_stop"


def test_a_time_capped_training_is_kept_as_such_when_scored_later(tmp_path):
    cfg = cfg_of()
    resume.begin_training(tmp_path, cfg)
    fake_checkpoint(tmp_path / "checkpoints" / "checkpoint_best.pt")
    log = [rec("valid", 150, epoch=2, valid_loss="4.0", valid_ppl="16"), rec("train", 150, epoch=2), TIME_CAP,
           "INFO | fairseq_cli.train | done training in 180.0 seconds"]
    (tmp_path / "train.log").write_text("\n".join(log) + "\n")
    plan = resume.plan(tmp_path, cfg)
    assert plan.action == "score" and plan.training["stopped_by"] == "time_cap"


# --- failure reasons -------------------------------------------------------------------------------

def test_divergence_reasons():
    assert non_finite_loss(rec("train_inner", 3, loss="inf")) == "loss is inf at update 3"
    assert non_finite_loss(rec("valid", 7, valid_loss="nan")) == "valid loss is nan at update 7"
    assert non_finite_loss(rec("train_inner", 3, loss="2.5")) is None
    crash = [rec("train", 2, epoch=1), "Traceback (most recent call last):", "  File x",
             "FloatingPointError: gradients are Nan/Inf"]
    assert exit_reason("fairseq-train", 1, crash) == \
        "training diverged in update 3 or later: gradients are Nan/Inf (fairseq's FloatingPointError)"


def test_out_of_memory_and_kills_are_named():
    oom = ["Traceback (most recent call last):",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert exit_reason("fairseq-train", 1, oom).startswith("out of memory: torch.OutOfMemoryError: CUDA out of memory")
    assert exit_reason("fairseq-train", -9, ["epoch 1"]) == \
        "fairseq-train was killed by SIGKILL (out of memory? the kernel's OOM killer sends SIGKILL)"
    # A real-time signal between SIGRTMIN and SIGRTMAX has no name in Python's signal module: its number.
    assert exit_reason("fairseq-train", -(signal.SIGRTMIN + 3), []) == \
        f"fairseq-train was killed by {signal.SIGRTMIN + 3}"
    assert exit_reason("fairseq-train", 2, ["usage: ...", "fairseq-train: error: unrecognized arguments: --x"]) == \
        "fairseq-train exited with status 2: fairseq-train: error: unrecognized arguments: --x"


# --- time limits that agree -------------------------------------------------------------------------

def test_the_training_limit_is_never_shorter_than_the_training_time_asked_for():
    # The case from the issue: budget=cpu (step limit 15 min) with 25 minutes of training asked for.
    limits = step_limits(OmegaConf.create({"step_timeout_min": 15, "max_time_min": 25}))
    assert limits.train_s >= 25 * 60 and limits.train_s == 30 * 60 and limits.other_s == 15 * 60
    assert "budget.max_time_min=25" in limits.note and "budget.step_timeout_min=15" in limits.note
    assert step_limits(OmegaConf.create({"step_timeout_min": 15, "max_time_min": 3})).train_s == 15 * 60
    assert step_limits(OmegaConf.create({"step_timeout_min": 10, "max_time_min": 0})).train_s == 10 * 60
    assert step_limits(OmegaConf.create({"step_timeout_min": 0, "max_time_min": 600})).train_s == 0
    with pytest.raises(ConfigError, match=r"budget.step_timeout_min=-1 is not allowed; allowed: minutes >= 0"):
        step_limits(OmegaConf.create({"step_timeout_min": -1, "max_time_min": 0}))


# --- the sweep's summary line -----------------------------------------------------------------------

def write_sweep(root: Path, cells: dict):
    (root / "multirun.yaml").write_text(textwrap.dedent("""\
        hydra:
          sweeper: {params: {lr: '0.002,10.0', placement: 'both,none'}}
          overrides: {task: ['seed=1']}
          job: {config: {override_dirname: {exclude_keys: [], item_sep: ',', kv_sep: '='}}}
        model: {name: fconv_small, family: fconv}
        pe: learned
        placement: both
        """))
    for name, record in cells.items():
        (root / name).mkdir()
        (root / name / "result.json").write_text(record if isinstance(record, str) else json.dumps(record))


def test_summary_line_names_failed_interrupted_and_missing_cells(tmp_path):
    write_sweep(tmp_path, {
        "lr=0.002,placement=both,seed=1": {"status": "ok"},
        "lr=10.0,placement=both,seed=1": {
            "status": "failed", "error": "fairseq-train stopped: loss is inf at update 3 (log: /x/train.log)"},
        "lr=0.002,placement=none,seed=1": {"status": "ok"},
        "lr=10.0,placement=none,seed=1": {"status": "failed", "error": "training diverged: x"},
    })
    line, status = summarize(tmp_path)
    assert line == ("4 cells: 2 ok, 2 failed: lr=10.0,placement=both (fairseq-train stopped: loss is inf at update 3); "
                    "lr=10.0,placement=none (training diverged: x)")
    assert status == 1
    (tmp_path / "lr=10.0,placement=none,seed=1" / "result.json").write_text('{"status": "interrupted", "err')
    (tmp_path / "lr=10.0,placement=both,seed=1" / "result.json").write_text(json.dumps({"status": "interrupted"}))
    line, status = summarize(tmp_path, interrupted_by=143)
    assert line == ("4 cells: 2 ok, 1 interrupted: lr=10.0,placement=both, "
                    "1 not run: lr=10.0,placement=none (result.json unreadable)") and status == 143


def test_all_ok_is_status_zero(tmp_path):
    write_sweep(tmp_path, {f"lr={lr},placement={p},seed=1": {"status": "ok"}
                           for lr in ("0.002", "10.0") for p in ("both", "none")})
    assert summarize(tmp_path) == ("4 cells: 4 ok", 0)


def test_summary_line_names_cells_stopped_at_the_time_cap(tmp_path):
    """Finished, so the sweep succeeds; but the line says which cells did not train in full."""
    write_sweep(tmp_path, {f"lr={lr},placement={p},seed=1":
                           {"status": "ok", "stopped_by": "time_cap" if lr == "10.0" and p == "none" else "max_epoch"}
                           for lr in ("0.002", "10.0") for p in ("both", "none")})
    assert summarize(tmp_path) == ("4 cells: 4 ok (1 stopped at the time cap: lr=10.0,placement=none)", 0)


# --- one run at a time per cell --------------------------------------------------------------------

HOLD_LOCK = """
import sys, time
from pathlib import Path
from posenc.harness.run.lock import cell_lock
with cell_lock(Path(sys.argv[1]), lambda m: print(m, flush=True)):
    print("got it", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_run_waits_for_the_cell_and_a_killed_one_lets_go(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path), "30"], env=env, stdout=subprocess.PIPE,
                             text=True)
    assert first.stdout.readline().strip() == "got it"
    second = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path), "0"], env=env, stdout=subprocess.PIPE,
                              text=True)
    line = second.stdout.readline()
    assert line.startswith(f"another posenc-run (pid {first.pid} on ") and \
        line.rstrip().endswith("waiting for it to finish")
    time.sleep(1)
    assert second.poll() is None  # still waiting
    first.kill()  # SIGKILL: the operating system drops its lock
    first.wait()
    out, _ = second.communicate(timeout=30)
    assert "got it" in out and second.returncode == 0


# --- a signal to a running step ----------------------------------------------------------------------

STEP = """
import sys
from pathlib import Path
from posenc.harness.run import signals
from posenc.harness.run.step import run_step
signals.install()
try:
    with signals.interruptible():
        run_step("child", [sys.executable, "-c", sys.argv[2]], Path(sys.argv[1]))
except signals.StopRequested as stop:
    print("stopped:", stop, flush=True)
"""

# A "trainer" that announces a checkpoint save, takes a while to write it, then trains on.
SLOW_SAVE = """
import time
print("Preparing to save checkpoint for epoch 1 @ 3 updates", flush=True)
time.sleep(3)
print("Saved checkpoint /c/checkpoint_last.pt (epoch 1 @ 3 updates, score 5.0) (writing took 3 seconds)", flush=True)
time.sleep(60)
"""


def test_sigterm_waits_for_a_begun_checkpoint_save_then_stops_the_step(tmp_path):
    log = tmp_path / "child.log"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", STEP, str(log), SLOW_SAVE], env=env, stdout=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while "Preparing to save" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "stopped: interrupted by SIGTERM"
    assert "Saved checkpoint" in log.read_text()  # the save was allowed to finish


# --- a signal to posenc-run alone reaches the cells in its joblib workers -------------------------------

# Stand-ins for joblib workers: the marker in their command line, one with a SIGTERM handler (a
# worker that has run a cell), one without (a fresh worker, which the signal would kill).
WORKER = """
import signal, sys, time
if sys.argv[1] == "catches":
    signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[2], "a").write("got SIGTERM\\n"), sys.exit(0)))
print("ready", flush=True)
time.sleep(60)
"""

PARENT = """
import signal, subprocess, sys
from posenc.harness.run import signals
signals.install()
workers = [subprocess.Popen([sys.executable, "-c", sys.argv[1], kind, sys.argv[2], signals.JOBLIB_WORKER.decode()],
                            stdout=subprocess.PIPE, text=True) for kind in ("catches", "fresh")]
for w in workers:
    w.stdout.readline()
print("found", signals.joblib_workers(signal.SIGTERM) == [workers[0].pid], flush=True)
signal.raise_signal(signal.SIGTERM)  # as `kill PID` does: to this process alone
print("worker exited", workers[0].wait(timeout=30), "fresh alive", workers[1].poll() is None, flush=True)
workers[1].kill()
"""


def test_sigterm_to_the_parent_is_forwarded_to_its_workers_that_run_cells(tmp_path):
    got = tmp_path / "got"
    out = subprocess.run([sys.executable, "-c", PARENT, WORKER, str(got)], env=dict(os.environ, PYTHONPATH=str(REPO)),
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[:2] == ["found True", "worker exited 0 fresh alive True"], out.stderr
    assert got.read_text() == "got SIGTERM\n"


class FakeStep:
    def __init__(self):
        self.requests = []

    def request(self, why, at_once):
        self.requests.append(at_once)


def test_one_signal_delivered_twice_is_one_stop_a_later_one_stops_at_once(monkeypatch):
    """A worker gets SIGTERM from the process group and again forwarded by posenc-run: the same
    stop. A second signal later on (a user's second Ctrl-C) still stops at once."""
    from posenc.harness.run import signals
    step, clock = FakeStep(), [100.0]
    monkeypatch.setattr(signals, "STOP", signals._Stop())
    monkeypatch.setattr(signals.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(signals, "_forward", lambda signum: None)
    signals.STOP.child = step
    signals._handler(signal.SIGTERM, None)
    clock[0] += 0.2
    signals._handler(signal.SIGTERM, None)
    assert step.requests == [False]
    clock[0] += signals.SAME_STOP_S
    signals._handler(signal.SIGTERM, None)
    assert step.requests == [False, True] and signals.STOP.signum == signal.SIGTERM
