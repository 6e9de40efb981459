"""Resuming a cell where it stopped.

A cell directory keeps fairseq's ``checkpoints/`` and ``state.json``: the hash of the training
configuration the checkpoints belong to and, once training ended, its summary. A rerun

- scores a cell whose training finished (and whose best checkpoint is intact) without retraining;
- resumes an unfinished cell from ``checkpoints/checkpoint_last.pt`` with fairseq's own restore
  (optimizer, scheduler, data iterator and update count carry on);
- starts afresh, and says why, when the training configuration changed, on ``redo=true``, or
  when there is nothing intact to resume from; on ``redo=inexact`` when its training was, or would
  be, resumed inexactly (``inexact_training``).

Whether a resume is exact the trainer decides and says (``posenc.trainer.exactness``); ``state.json``'s
``exact_resume`` is the version of the resume state (``RESUME_VERSION``) the trainer writing the
cell's checkpoints saves in them, so that ``redo=inexact`` knows checkpoints no exact resume can start from.

Only checkpoints that fairseq wrote into the cell's own ``checkpoints/`` are ever loaded: a
symbolic link in there, or a file cut short (the zip archive torch writes lacks its end record),
is never handed to fairseq.
"""

import json
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from posenc.atomic import copy_atomic, write_json_atomic
from posenc.cells.layout import BEST, CHECKPOINTS, HYPOTHESES_FILE, LAST, RESULT_FILE, STATE_FILE, TRAIN_LOG
from posenc.cells.record import Record, inexact_resume
from posenc.harness.fairseq_logs import NEW_RUN, resume_exact, training_fields
from posenc.trainer.stop import RESUME_VERSION, STOPPED_MARK

_INTERVAL = re.compile(r"^checkpoint_\d+_(\d+)\.pt$")


@dataclass
class Plan:
    action: str                                   # "fresh", "resume" or "score"
    message: str = ""                             # what to tell the user ("" for a plain fresh start)
    training: dict = field(default_factory=dict)  # the finished training's summary ("score")


def intact(checkpoint: Path) -> bool:
    """A checkpoint fairseq wrote here, whole: a regular file (not a link to elsewhere) that is a
    complete zip archive (torch's format; one cut short has no end-of-archive record)."""
    return checkpoint.is_file() and not checkpoint.is_symlink() and zipfile.is_zipfile(checkpoint)


def read_state(job_dir: Path):
    try:
        state = json.loads((Path(job_dir) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return state if isinstance(state, dict) else None


def start_over(job_dir: Path) -> None:
    """Forget everything a cell did: checkpoints, state and result (logs are overwritten by the
    new run)."""
    job_dir = Path(job_dir)
    shutil.rmtree(job_dir / CHECKPOINTS, ignore_errors=True)
    for name in (STATE_FILE, RESULT_FILE, HYPOTHESES_FILE):
        (job_dir / name).unlink(missing_ok=True)


def plan(job_dir: Path, cell) -> Plan:
    """What to do with ``cell`` (a ``ResolvedCell``) in ``job_dir`` (it may clear stale state)."""
    job_dir = Path(job_dir)
    saved = job_dir / CHECKPOINTS
    state = read_state(job_dir)
    if state is None:
        if any(saved.glob("*.pt")):
            start_over(job_dir)
            return Plan("fresh", "checkpoints without a record of their configuration: starting afresh")
        return Plan("fresh")
    current = cell.hashes.recognised_training(state.get("training_hash"))
    if not current:
        start_over(job_dir)
        return Plan("fresh", "the configuration changed since this cell's checkpoints were saved: starting afresh")
    if state.get("training_hash") != current:
        state["training_hash"] = current  # hashed before the optim group: the same training
        write_json_atomic(job_dir / STATE_FILE, state)
    if state.get("finished"):
        if intact(saved / BEST):
            training = state.get("training", {})
            return Plan("score", f"training finished earlier ({training.get('num_updates', '?')} updates): "
                                 "scoring it without retraining", training)
        start_over(job_dir)
        return Plan("fresh", f"training finished earlier but {CHECKPOINTS}/{BEST} is gone or damaged: training afresh")
    finished = finished_in_log(job_dir)
    if finished and intact(saved / BEST):  # fairseq ended normally, the harness was stopped before it noted so
        finish_training(job_dir, cell, {**finished, "train_wall_s": state.get("train_wall_s")})
        return Plan("score", f"training finished earlier ({finished['num_updates']} updates): "
                             "scoring it without retraining", {**finished, "train_wall_s": state.get("train_wall_s")})
    source = _resumable(saved)
    if source is None:
        note = f"{CHECKPOINTS}/{LAST} is damaged and no other checkpoint is whole: " if (saved / LAST).exists() else ""
        start_over(job_dir)
        return Plan("fresh", (note + "starting afresh") if note else "")
    if source.name != LAST:
        copy_atomic(source, saved / LAST)
        return Plan("resume", f"{CHECKPOINTS}/{LAST} is damaged (cut short while it was written): "
                              f"resuming from {CHECKPOINTS}/{source.name}")
    return Plan("resume", f"resuming from {CHECKPOINTS}/{LAST}")


def finished_in_log(job_dir: Path):
    """The training fields of the record when the last fairseq-train run in ``train.log`` ended
    normally (``done training``), else None. (Resuming a finished training would not be a no-op:
    fairseq trains one more update before it checks its caps.)"""
    log = Path(job_dir) / TRAIN_LOG
    if not log.exists():
        return None
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    runs = [i for i, line in enumerate(lines) if NEW_RUN in line]
    last_run = lines[runs[-1]:] if runs else lines
    if not any("done training in" in line for line in last_run) or any(STOPPED_MARK in line for line in last_run):
        return None  # a stop on request also ends with fairseq's "done training"
    training = training_fields(lines)
    return training if training["valid_ppl"] is not None else None


def _resumable(saved: Path):
    """The newest whole checkpoint to resume from: ``checkpoint_last.pt``, else the newest
    ``checkpoint_<epoch>_<updates>.pt`` (``--save-interval-updates``), else None."""
    if intact(saved / LAST):
        return saved / LAST
    interval = sorted((int(m.group(1)), p) for p in saved.glob("checkpoint_*_*.pt") if (m := _INTERVAL.match(p.name)))
    for _, path in reversed(interval):
        if intact(path):
            return path
    return None


def inexact_training(job_dir: Path) -> str:
    """Why the cell's training is not what an uninterrupted run gives, or "": a finished record
    resumed inexactly, an inexact resume in its train log, or checkpoints to resume from that an
    older trainer wrote (without the random states)."""
    record = Record.read(job_dir)
    if record is not None and record.ok:
        if not inexact_resume(record):
            return ""
        why = f" ({record.resume_inexact_reason})" if record.resume_inexact_reason else ""
        return f"resumed inexactly from update {record.resumed_from_update}{why}"
    log = Path(job_dir) / TRAIN_LOG
    if log.exists() and resume_exact(log.read_text(encoding="utf-8", errors="replace").splitlines()) is False:
        return "its training was resumed inexactly"
    state = read_state(job_dir)
    if state and state.get("exact_resume") != RESUME_VERSION and any((Path(job_dir) / CHECKPOINTS).glob("*.pt")):
        return ("its checkpoints were written without the random states an exact resume needs"
                if not state.get("exact_resume") else "its checkpoints were written by another version of the trainer")
    return ""


def begin_training(job_dir: Path, cell) -> dict:
    """Record which configuration the checkpoints about to be written belong to, and which version of
    what an exact resume needs they hold."""
    state = read_state(job_dir) or {}
    state = {"training_hash": cell.hashes.training, "finished": False, "train_wall_s": state.get("train_wall_s", 0.0),
             "exact_resume": RESUME_VERSION}
    write_json_atomic(Path(job_dir) / STATE_FILE, state)
    return state


def add_training_time(job_dir: Path, seconds: float) -> float:
    """Add a training run's wall time to the cell's total (runs killed outright are not counted)."""
    state = read_state(job_dir) or {}
    state["train_wall_s"] = round(float(state.get("train_wall_s", 0.0)) + seconds, 1)
    write_json_atomic(Path(job_dir) / STATE_FILE, state)
    return state["train_wall_s"]


def finish_training(job_dir: Path, cell, training: dict) -> None:
    state = read_state(job_dir) or {}
    write_json_atomic(Path(job_dir) / STATE_FILE, {**state, "training_hash": cell.hashes.training, "finished": True,
                                                   "training": training})
