"""Decoding in the trainer's process (``posenc.trainer.decode``), seen from the harness: the plan
it hands the trainer, and what the trainer's output says it decoded.

A split counts as decoded in the trainer only when this training run said so (``DECODED_MARK``)
and its log is there: logs of earlier runs, and the partial file of a decoding that was killed,
are cleared before the run starts, so that a partial output is never read as a whole one. Any
split the trainer did not finish is decoded by the stock fairseq-generate child, as before.
"""

import time
from pathlib import Path

from posenc.cells import layout
from posenc.trainer.decode import DECODE_FLAG, DECODING_MARK, FAILED_MARK, decoded_split, write_plan


class TrainerDecoding:
    """The splits one training run decodes in its own process, and the times its output gives."""

    def __init__(self, job_dir: Path, generate_argvs: dict, enabled: bool):
        self.job_dir = Path(job_dir)
        self.generate_argvs = generate_argvs if enabled else {}
        self.began = None      # time.monotonic() when training ended and decoding began
        self.seconds = {}      # split -> the trainer's decoding seconds (model load and search)
        self.failure = ""      # the trainer's one line on a decoding that failed (a child decodes instead)

    def train_argv(self, argv: list) -> list:
        """``argv`` with the plan (none when nothing is to be decoded); clears earlier outputs."""
        for split in self.generate_argvs:
            log = self.job_dir / layout.generate_log(split)
            log.unlink(missing_ok=True)
            log.with_name(log.name + ".part").unlink(missing_ok=True)
        if not self.generate_argvs:
            return list(argv)
        plan = self.job_dir / layout.DECODE_PLAN
        write_plan(plan, {split: (generate, self.job_dir / layout.generate_log(split))
                          for split, generate in self.generate_argvs.items()})
        return [*argv, DECODE_FLAG, str(plan)]

    def step_limit(self, train_s: float, generate_s: float) -> float:
        """The training step's hard limit once it also decodes: each split's own limit added, so
        that a decoding which a fairseq-generate child would have had time for is never cut short
        (0, no limit, where either has none; ``posenc.harness.config.limits`` sets both or neither)."""
        if not self.generate_argvs or not train_s:
            return train_s
        return train_s + generate_s * len(self.generate_argvs) if generate_s else 0

    def on_line(self, line: str) -> None:
        if line.startswith(DECODING_MARK):
            self.began = time.monotonic()
        if line.startswith(FAILED_MARK):
            self.failure = line.strip()
        done = decoded_split(line)
        if done:
            self.seconds[done[0]] = round(done[1], 1)

    def decoded(self, split: str) -> bool:
        return split in self.seconds and (self.job_dir / layout.generate_log(split)).is_file()

    def training_seconds(self, started: float) -> float:
        """Wall seconds of the training run begun at ``started``, less the decoding after it."""
        return (self.began or time.monotonic()) - started
