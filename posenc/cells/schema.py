"""A cell's record (``result.json``): its fields, its statuses, its per-split names, and how to
read one back, old records included.

The harness writes records with ``new_record``; the report, the analysis and the harness's own
summary read them with ``read_result`` and the accessors here.
"""

import json
from functools import cache
from pathlib import Path

from omegaconf import OmegaConf

from posenc.cells.layout import RESULT_FILE
from posenc.confdir import CONF_DIR
from posenc.metrics import bleu_signature_options, chrf_signature_options

# The contract's columns, in table order (results.csv keeps this order, extras after).
FIELDS = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "status",
          "error", "bleu", "bleu_signature", "tok_bleu", "valid_ppl", "test_sentences", "num_updates",
          "train_wall_s", "hypotheses", "job_dir")
# The cell's identity: what its configuration asked for (the rest of a record is its outcome).
IDENTITY = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed")

# ``status``: every status but OK has a non-empty ``error`` that says why.
OK = "ok"
FAILED = "failed"
INTERRUPTED = "interrupted"  # a signal to the harness (SIGTERM, SIGINT): a rerun resumes it
RUNNING = "running"          # written when the cell starts; still there: it is running, or was killed outright
STATUSES = (OK, FAILED, INTERRUPTED, RUNNING)
RUNNING_ERROR = "still running, or stopped without recording an outcome (killed outright?)"

# The test splits a cell may be scored on: ``test`` always, ``test_long`` where the corpus has one.
SPLITS = ("test", "test_long")

# ``stopped_by``: what ended a cell's training (max_epoch, max_update or TIME_CAP). A cell that
# budget.max_time_min stopped is finished but not whole: its score depends on the machine's speed.
TIME_CAP = "time_cap"


def field(name: str, split: str) -> str:
    """A record's field for a split: no suffix for test (``bleu``), ``_<split>`` otherwise
    (``bleu_test_long``)."""
    return name if split == "test" else f"{name}_{split}"


def new_record(identity: dict, job_dir: Path, family: str, error: str = "") -> dict:
    """A cell's record before it has an outcome: ``running`` (or ``failed`` with ``error``, a
    cell refused before it started), every score empty."""
    status = FAILED if error else RUNNING
    return {**{key: identity.get(key) for key in IDENTITY}, "family": family, "status": status,
            "error": error or RUNNING_ERROR, "bleu": None, "bleu_signature": "", "tok_bleu": None,
            "chrf": None, "valid_ppl": None, "test_sentences": None, "num_updates": None, "train_wall_s": None,
            "hypotheses": "", "job_dir": str(job_dir)}


def time_capped(record: dict) -> bool:
    return record.get("stopped_by") == TIME_CAP


def read_result(job_dir: Path):
    """The cell's record, or None when there is none or it cannot be parsed (torn, foreign)."""
    record, _ = read_result_why(job_dir)
    return record


def read_result_why(job_dir: Path):
    """``(record, "")``, ``(None, "")`` when there is no ``result.json``, or ``(None, why)`` when
    it cannot be read as a record."""
    path = Path(job_dir) / RESULT_FILE
    if not path.exists():
        return None, ""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as err:
        return None, type(err).__name__  # a torn or foreign file: the cell counts as not finished
    return (record, "") if isinstance(record, dict) else (None, "not a JSON object")


def family(record: dict) -> str:
    """The record's model family; records written before it was recorded: the family of their
    model's config, ``conf/model/<model>.yaml`` ("unknown" without one)."""
    return str(record.get("family") or config_family(str(record.get("model"))))


@cache
def config_family(model_name: str) -> str:
    """``"fconv"``, ``"transformer"``, or ``"unknown"`` for a model config name with no file."""
    path = CONF_DIR / "model" / f"{model_name}.yaml"
    if not path.is_file():
        return "unknown"
    cfg = OmegaConf.load(path)  # `model:` under Hydra's _global_ package (a bare `family:` before it picked its optim)
    return str(OmegaConf.select(cfg, "model.family", default=None) or cfg.get("family", "unknown"))


def bleu_options(record: dict, split: str = "test") -> dict:
    """The ``sacrebleu.metrics.BLEU(...)`` arguments the split was scored with: as recorded, or
    for records written before they were, parsed from the split's signature."""
    recorded = record.get(field("bleu_options", split))
    if isinstance(recorded, dict):
        return dict(recorded)
    return bleu_signature_options(str(record.get(field("bleu_signature", split)) or ""))


def chrf_options(record: dict, split: str = "test") -> dict:
    """The ``sacrebleu.metrics.CHRF(...)`` arguments the split was scored with: as recorded, or
    for records written before they were, parsed from the split's chrF signature; records from
    before chrF++ was recorded have none: chrF++ with BLEU's casing."""
    recorded = record.get(field("chrf_options", split))
    if isinstance(recorded, dict):
        return dict(recorded)
    signature = str(record.get(field("chrf_signature", split)) or "")
    options = chrf_signature_options(signature)
    if not signature and bleu_options(record, split).get("lowercase"):
        options["lowercase"] = True
    return options
