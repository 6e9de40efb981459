"""A cell's directory: the name of every file the harness writes there.

Whoever writes or reads one of them (the cell, resume, the W&B logger, the report, the analysis)
takes its name from here.
"""

from pathlib import Path

RESULT_FILE = "result.json"        # the record (posenc.cells.record)
STATE_FILE = "state.json"          # which configuration the checkpoints belong to (posenc.harness.run.resume)
PROVENANCE_FILE = "provenance.json"  # versions and git commit the cell ran with
COMMANDS_FILE = "commands.sh"      # the exact fairseq command lines, to rerun by hand
ERROR_LOG = "error.log"            # the traceback of an unexpected failure (the record keeps one line)
TRAIN_LOG = "train.log"            # fairseq-train's output, appended to on resume
CHECKPOINTS = "checkpoints"        # fairseq's --save-dir
LAST = "checkpoint_last.pt"        # what a resumed training starts from
BEST = "checkpoint_best.pt"        # what is scored and analysed
HYPOTHESES_FILE = "hypotheses.txt"  # the test split's detokenized output, one line per sentence
DECODE_PLAN = "decode-plan.json"   # what the trainer decodes once training ends (posenc.harness.run.decoding)


def generate_log(split: str) -> str:
    return f"generate-{split}.log"


def hypotheses_file(split: str, tokenized: bool = False) -> str:
    """``hypotheses.txt`` for test, ``hypotheses.<split>.txt`` otherwise; ``.tok.txt`` before
    detokenizing."""
    name = HYPOTHESES_FILE if split == "test" else f"hypotheses.{split}.txt"
    return name.replace(".txt", ".tok.txt") if tokenized else name


def best_checkpoint(job_dir) -> Path:
    return Path(job_dir) / CHECKPOINTS / BEST
