"""Reading what fairseq prints: JSON training records and generate's hypothesis lines."""

import json
import re

from posenc.cells.record import TIME_CAP
from posenc.trainer.stop import EXACT_RESUME_MARK, FINISHED_MARK, INEXACT_RESUME_MARK

_RECORD = re.compile(r"\| (train|valid|train_inner) \| (\{.*\})\s*$")


def parse_record(line: str):
    """``(kind, dict)`` for a ``--log-format json`` record line, else None."""
    match = _RECORD.search(line)
    if not match:
        return None
    try:
        return match.group(1), json.loads(match.group(2))
    except json.JSONDecodeError:
        return None


# The update count of each kind of record.
_UPDATES_KEY = {"train": "train_num_updates", "valid": "valid_num_updates", "train_inner": "num_updates"}
_LOADED = re.compile(r"Loaded checkpoint (.+) \(epoch (\d+) @ (\d+) updates\)")
_SAVED = re.compile(r"Saved checkpoint (.+) \(epoch (\d+) @ (\d+) updates")


def record_updates(kind: str, rec: dict) -> int:
    return int(float(rec.get(_UPDATES_KEY[kind], 0) or 0))


def loaded_checkpoint_updates(line: str):
    """The update count fairseq restored training from, on its ``Loaded checkpoint`` line; else None."""
    match = _LOADED.search(line)
    return int(match.group(3)) if match else None


def saved_checkpoint_updates(line: str):
    """The update count of a checkpoint fairseq finished saving (all its copies), else None."""
    match = _SAVED.search(line)
    return int(match.group(3)) if match else None


def save_began(line: str) -> bool:
    return "Preparing to save checkpoint" in line


def save_ended(line: str) -> bool:
    return _SAVED.search(line) is not None


def resumed_from(log_lines) -> int:
    """The update count the last run in a (possibly appended) train log restored from; 0 if fresh."""
    found = 0
    for line in log_lines:
        if "No existing checkpoint found" in line:
            found = 0
        else:
            updates = loaded_checkpoint_updates(line)
            if updates is not None:
                found = updates
    return found


# A resume the trainer said nothing about: one by a trainer before exact resume (issue 48).
UNMARKED_RESUME = "resumed by a trainer that restores no random states (a version before exact resume)"
_INEXACT = re.compile(re.escape(INEXACT_RESUME_MARK) + r" \d+ \((.*)\)\s*$")


def resumes(log_lines) -> list:
    """``(update, why it was inexact or "")`` of every resume since the training's fresh start: the
    trainer prints ``EXACT_RESUME_MARK`` or ``INEXACT_RESUME_MARK (why)`` after fairseq's ``Loaded
    checkpoint``; a resume without either line (an older version's) was not exact."""
    found = []
    for line in log_lines:
        updates = loaded_checkpoint_updates(line)
        if "No existing checkpoint found" in line:
            found = []
        elif updates is not None:
            found.append((updates, UNMARKED_RESUME))
        elif found and EXACT_RESUME_MARK in line:
            found[-1] = (found[-1][0], "")
        elif found and INEXACT_RESUME_MARK in line:
            why = _INEXACT.search(line)
            found[-1] = (found[-1][0], why.group(1) if why else "the trainer said it was inexact")
    return found


def resume_exact(log_lines):
    """Whether every resume since the training's fresh start was exact; None: never resumed."""
    found = resumes(log_lines)
    return not any(why for _, why in found) if found else None


def resume_inexact_reason(log_lines):
    """Why the resumes that were not exact were not (``update N: why``, "; " between them), else None."""
    reasons = [f"update {updates}: {why}" for updates, why in resumes(log_lines) if why]
    return "; ".join(reasons) or None


def last_saved_update(log_lines):
    saved = None
    for line in log_lines:
        updates = saved_checkpoint_updates(line)
        if updates is not None:
            saved = updates
    return saved


def training_records(log_lines):
    """``(kind, record)`` of the training that the checkpoints hold. A log may hold several runs
    (a cell resumed after an interruption): when a run restores update U, what earlier runs logged
    after U was lost with them and is dropped."""
    records = []
    for line in log_lines:
        restored = loaded_checkpoint_updates(line)
        if restored is not None:
            records = [(k, r) for k, r in records if record_updates(k, r) <= restored]
            continue
        parsed = parse_record(line)
        if parsed:
            records.append(parsed)
    return records


# What ended a training run. fairseq logs a line for its update and time caps, early stopping
# (--patience) and the plateau schedule's floor (--stop-min-lr); it logs none when it simply runs out
# of epochs. The trainer's FINISHED_MARK names what had ended a training it resumed at its last save.
_STOP_LINES = {"Stopping training due to num_updates": "max_update",
               "Stopping training due to cumulative_training_time": TIME_CAP,
               "early stop since valid performance hasn't improved": "early_stop",
               "stopping training because current learning rate": "stop_min_lr",
               **{f"{FINISHED_MARK} {reason}": reason for reason in ("max_update", TIME_CAP, "early_stop")}}
# When several end the same update: the first of these.
STOP_ORDER = ("max_update", TIME_CAP, "early_stop", "stop_min_lr")
NEW_RUN = "Preparing to load checkpoint"


def stopped_by(log_lines) -> str:
    """What ended the last run in a finished train log: ``max_update`` when the update cap was
    reached (even if time ran out on the same update), ``time_cap`` (``budget.max_time_min``,
    fairseq's ``--stop-time-hours``) when that cut training short, ``early_stop`` (``--patience``),
    ``stop_min_lr`` (the lr fell to ``--stop-min-lr``: ``optim=convs2s``'s own end), else ``max_epoch``."""
    reasons = set()
    for line in log_lines:
        if NEW_RUN in line:
            reasons = set()
        reasons.update(reason for text, reason in _STOP_LINES.items() if text in line)
    return next((reason for reason in STOP_ORDER if reason in reasons), "max_epoch")


# fairseq's trainer prints each rank's CUDA device when it trains on CUDA (CudaEnvironment), nothing on
# the CPU; then fairseq_cli.train says "training on N devices (GPUs/TPUs)" and only after that
# "Preparing to load checkpoint" (NEW_RUN). So a run's rank lines come before the line that starts
# it for the other readers here: its device is settled at the "training on" line.
_CUDA_RANK = re.compile(r"\| fairseq\.utils \| rank +(\d+): capabilities = .*; name = (.*?)\s*$")
_TRAINING_ON = re.compile(r"\| fairseq_cli\.train \| training on \d+ devices \(GPUs/TPUs\)")


def training_device(log_lines) -> str:
    """What the last run in the log trained on: ``cpu``, or ``cuda: NVIDIA H200 x2`` (name, ranks)."""
    seen, device = {}, None
    for line in log_lines:
        found = _CUDA_RANK.search(line)
        if found:
            seen[int(found.group(1))] = found.group(2)
        elif _TRAINING_ON.search(line):  # this run's device lines are all in: the run trains on them
            device, seen = seen, {}
    names = seen if device is None else device  # a log cut before its "training on" line: what it showed
    if not names:
        return "cpu"
    return "cuda: " + ", ".join(f"{name} x{list(names.values()).count(name)}" for name in dict.fromkeys(names.values()))


def training_fields(log_lines) -> dict:
    """The training's fields of a cell's record, read from its finished train log."""
    summary = training_summary(log_lines)
    return {"valid_ppl": summary["valid_ppl"], "valid_loss": summary["valid_loss"],
            "num_updates": summary["num_updates"], "epochs": summary["epochs"],
            "best_epoch": summary["best_epoch"], "stopped_by": stopped_by(log_lines),
            "resumed_from_update": resumed_from(log_lines), "resume_exact": resume_exact(log_lines),
            "resume_inexact_reason": resume_inexact_reason(log_lines),
            "device": training_device(log_lines)}


def training_summary(log_lines) -> dict:
    """Best validation record (lowest loss: fairseq's checkpoint_best) and the final update count."""
    best, num_updates, epochs = None, 0, 0
    for kind, rec in training_records(log_lines):
        if kind == "valid" and "valid_loss" in rec:
            if best is None or float(rec["valid_loss"]) < float(best["valid_loss"]):
                best = rec
            num_updates = max(num_updates, record_updates(kind, rec))
        elif kind == "train":
            epochs = max(epochs, int(rec.get("epoch", 0)))
            num_updates = max(num_updates, record_updates(kind, rec))
    return {
        "valid_ppl": float(best["valid_ppl"]) if best else None,
        "valid_loss": float(best["valid_loss"]) if best else None,
        "best_epoch": int(best["epoch"]) if best else None,
        "num_updates": num_updates,
        "epochs": epochs,
    }


def wandb_metrics(kind: str, rec: dict):
    """``(update count, {"<kind>/<stat>": value})`` of one JSON record, named as fairseq's own W&B
    wrapper names them (``train_inner/loss``, ``valid/ppl``...); ``(None, {})`` without an update count."""
    prefix = "" if kind == "train_inner" else f"{kind}_"
    stats = {key[len(prefix):]: value for key, value in rec.items() if key.startswith(prefix)}
    try:
        step = int(float(stats.pop("num_updates")))
    except (KeyError, TypeError, ValueError):
        return None, {}
    metrics = {}
    for key, value in stats.items():
        try:
            metrics[f"{kind}/{key}"] = float(value)
        except (TypeError, ValueError):
            continue  # fairseq prints only numbers here; anything else is not a curve
    return step, metrics


_HYPOTHESIS = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$")


def hypotheses_by_id(generate_lines) -> dict:
    """``{sentence id: hypothesis text}`` from fairseq-generate's ``H-`` lines (best beam)."""
    out = {}
    for line in generate_lines:
        match = _HYPOTHESIS.match(line.rstrip("\n"))
        if match:
            out.setdefault(int(match.group(1)), match.group(2))
    return out
