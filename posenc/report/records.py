"""The result record of a cell (``result.json``): its file names, its fields, how to read one.

The harness writes records; the report reads them. Both import these names from here, so the
report never imports the harness.
"""

import json
from pathlib import Path

RESULT_FILE = "result.json"
HYPOTHESES_FILE = "hypotheses.txt"

# The contract's columns, in table order (results.csv keeps this order, extras after).
FIELDS = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "status",
          "error", "bleu", "bleu_signature", "tok_bleu", "valid_ppl", "test_sentences", "num_updates",
          "train_wall_s", "hypotheses", "job_dir")


# ``stopped_by``: what ended a cell's training (max_epoch, max_update or TIME_CAP). A cell that
# budget.max_time_min stopped is finished but not whole: its score depends on the machine's speed.
TIME_CAP = "time_cap"


def time_capped(record: dict) -> bool:
    return record.get("stopped_by") == TIME_CAP


def read_result(job_dir: Path):
    """The cell's record, or None when there is none or it cannot be parsed (torn, foreign)."""
    path = Path(job_dir) / RESULT_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None  # a torn or foreign file: the cell counts as not finished
    return record if isinstance(record, dict) else None
