"""fairseq-generate inside the trainer's process, once training ends (``posenc.trainer.decode``
says why and what the harness hands over).

Each split runs stock ``fairseq_cli.generate.cli_main`` on the cell's own generate command line:
fairseq's parser, checkpoint loading (``checkpoint_best.pt``, as the separate step would), seeding
and search are all fairseq's, so the hypotheses are those of ``fairseq-generate`` on the same
checkpoint (tests/test_decode_in_trainer.py compares them byte for byte). What changes is only where
its output goes: ``sys.stdout`` and fairseq's log lines go to a temporary file beside the split's
log, renamed over it once the split is whole.

A stop (SIGTERM) during decoding ends the process at once: nothing here is worth saving, and the
harness then scores the cell with a fairseq-generate child on its rerun. Any error is reported in
one line (``FAILED_MARK``) and leaves the remaining splits to the harness: training has finished
and its checkpoints are kept whatever happens here.
"""

import contextlib
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path

import torch
from fairseq_cli import generate

from posenc.trainer.decode import DECODED_MARK, DECODING_MARK, FAILED_MARK, plan_entries, read_plan
from posenc.trainer.stop import SAVE_AND_STOP

# fairseq_cli.generate's own log format (its logging.basicConfig), for the lines it logs.
_FORMAT = logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S")


def decode(plan_path) -> None:
    """Run every split of the plan at ``plan_path``, in order; never raises."""
    signal.signal(SAVE_AND_STOP, signal.SIG_DFL)
    print(DECODING_MARK, flush=True)
    gc.collect()  # the trainer's model and optimizer are gone: give their memory back before loading the best
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    try:
        for split, argv, log in plan_entries(read_plan(plan_path)):
            started = time.monotonic()
            generate_into(argv, log)
            print(f"{DECODED_MARK} {split} {time.monotonic() - started:.3f}", flush=True)
    except (Exception, SystemExit) as err:  # (argparse exits) the harness decodes what is left with fairseq-generate
        print(f"{FAILED_MARK} {type(err).__name__}: {err}".splitlines()[0], flush=True)


def generate_into(argv: list, log: Path) -> None:
    """``fairseq-generate ARGV > LOG``, in this process; LOG appears only when whole."""
    log = Path(log)
    partial = log.with_name(log.name + ".part")
    try:
        _generate(argv, partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, log)


def _generate(argv: list, partial: Path) -> None:
    root = logging.getLogger()
    kept = root.handlers[:]
    with open(partial, "w", encoding="utf-8", buffering=1) as out:
        handler = logging.StreamHandler(out)
        handler.setFormatter(_FORMAT)
        root.handlers = [handler]
        saved_argv = sys.argv
        sys.argv = [generate.__file__, *argv]
        try:
            with contextlib.redirect_stdout(out):
                generate.cli_main()
        finally:
            sys.argv = saved_argv
            root.handlers = kept
        out.flush()
        os.fsync(out.fileno())
