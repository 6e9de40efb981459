"""How the harness asks the trainer to decode the test split(s) once training ends, in the same
process, and how the trainer says what it did: shared by the trainer entry (``posenc.trainer.train``
and ``posenc.trainer.fairseq_decode``, inside fairseq's process) and the harness, which never imports fairseq.

A cell's start is paid once: fairseq-generate as a child of its own imports torch and fairseq and
loads the task again (seconds per cell, most of a small cell's fixed cost). With ``DECODE_FLAG
PLAN.json`` after fairseq-train's own arguments, the trainer, once ``fairseq_cli.train.main`` has
returned, runs ``fairseq_cli.generate`` on each planned split: the same command line as the cell's
stock fairseq-generate (parsed by fairseq's own generation parser), its output written to a
temporary file renamed to the split's ``generate-<split>.log`` only when whole. The harness keeps
the stock command lines in ``commands.sh`` and falls back to a fairseq-generate child for any split
whose log the trainer did not finish.

The trainer prints ``DECODING_MARK`` before it starts decoding (training is over by then) and
``DECODED_MARK <split> <seconds>`` after each split it wrote whole.
"""

import json
from pathlib import Path

from posenc.atomic import write_json_atomic

DECODE_FLAG = "--posenc-decode-plan"
DECODING_MARK = "posenc: training done; decoding in the trainer"
DECODED_MARK = "posenc: decoded"
FAILED_MARK = "posenc: decoding in the trainer failed:"


def plan_entries(plan: dict) -> list:
    """``[(split, generate argv without its program, log path)]`` of a plan, in order."""
    return [(split, list(entry["argv"]), Path(entry["log"])) for split, entry in plan.items()]


def write_plan(path: Path, generate: dict) -> None:
    """``generate``: ``{split: (the stock generate argv, its program included; the log path)}``;
    the program part (everything before the data directory) is dropped, as fairseq's parser wants."""
    write_json_atomic(Path(path), {split: {"argv": _arguments(argv), "log": str(log)}
                                   for split, (argv, log) in generate.items()})


def read_plan(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def split_argv(argv: list):
    """fairseq-train's own arguments and the plan's path (None without ``DECODE_FLAG``)."""
    argv = list(argv)
    if DECODE_FLAG not in argv:
        return argv, None
    at = argv.index(DECODE_FLAG)
    return argv[:at] + argv[at + 2:], argv[at + 1]


def decoded_split(line: str):
    """``(split, seconds)`` of a ``DECODED_MARK`` line, else None."""
    if not line.startswith(DECODED_MARK + " "):
        return None
    words = line.split()
    try:
        return words[2], float(words[3])
    except (IndexError, ValueError):
        return None


def _arguments(argv: list) -> list:
    """A generate command without its program: ``python -m fairseq_cli.generate DATA ...`` -> ``DATA ...``."""
    argv = list(argv)
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[3:]
    return argv[1:]
