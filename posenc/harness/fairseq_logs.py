"""Reading what fairseq prints: JSON training records and generate's hypothesis lines."""

import json
import re

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


def training_summary(log_lines) -> dict:
    """Best validation record (lowest loss: fairseq's checkpoint_best) and the final update count."""
    best, num_updates, epochs = None, 0, 0
    for line in log_lines:
        parsed = parse_record(line)
        if not parsed:
            continue
        kind, rec = parsed
        if kind == "valid" and "valid_loss" in rec:
            if best is None or float(rec["valid_loss"]) < float(best["valid_loss"]):
                best = rec
            num_updates = max(num_updates, int(float(rec.get("valid_num_updates", 0))))
        elif kind == "train":
            epochs = max(epochs, int(rec.get("epoch", 0)))
            num_updates = max(num_updates, int(float(rec.get("train_num_updates", 0))))
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
