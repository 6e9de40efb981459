"""The fairseq command lines of a cell, as argument lists (never shell strings)."""

import importlib.util
import shlex
import socket
import sys
from pathlib import Path

from posenc.trainer.deterministic import FLAG as DETERMINISTIC_FLAG

# The plugin's directory, found without importing it (that would import fairseq into posenc-run).
PLUGIN_DIR = Path(importlib.util.find_spec("posenc.fairseq_plugin").submodule_search_locations[0]).resolve()


# The stock trainer, except that --bf16 trains on the GPU instead of asking for a TPU and that SIGTERM saves
# a checkpoint at once and stops (see posenc/trainer/train.py).
TRAINER = ("-m", "posenc.trainer.train")


def train_program() -> list:
    """The program part of the training command: fairseq-train's ``main``, through ``posenc.trainer.train``."""
    return [sys.executable, *TRAINER]


def train_flags(cell) -> list:
    """Precision and device flags of fairseq-train (``cell``: a ResolvedCell)."""
    precision = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}[cell.precision]
    return precision + device_flags(cell)


# fairseq picks the device itself: a GPU where torch sees one, else the CPU. ``gpus`` is passed as
# ``--distributed-world-size`` always, because fairseq's default is *every* visible GPU, which would
# make a cell's effective batch size (and so its result) depend on the machine it ran on.
#
# With more than one GPU, fairseq would also infer its world size from the environment
# (``fairseq.distributed.utils.infer_init_method``): inside a SLURM job with one task per node it takes
# every GPU of the node, joblib cells sharing an allocation derive one port from ``SLURM_JOB_ID``, a
# bare ``salloc`` shell crashes, and torchrun's variables set another world size. An explicit
# ``--distributed-init-method tcp://localhost:<free port>`` skips all of that inference: the cell
# trains on the GPUs it asked for, on a port of its own. (One GPU or the CPU never infers anything.)


def free_port() -> int:
    """A TCP port no process on this machine listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def device_flags(cell, port: int = None) -> list:
    """The number of devices fairseq trains on; ``gpus=0``: one CPU process even where GPUs exist
    (without the world size, fairseq would start one CPU process per visible GPU). Several GPUs
    get their own rendezvous (``port``, else a free one), whatever SLURM or torchrun variables say."""
    if cell.gpus == 0:
        return ["--cpu", "--distributed-world-size", "1"]
    if cell.gpus == 1:
        return ["--distributed-world-size", "1"]
    return ["--distributed-world-size", str(cell.gpus),
            "--distributed-init-method", f"tcp://localhost:{port or free_port()}"]


# fairseq-generate as a module of this interpreter: no console script (its path and its interpreter)
# to find, in a venv, an installed package or a venv that reuses another's site-packages.
GENERATOR = ("-m", "fairseq_cli.generate")


def flags(options: dict) -> list:
    """``{"clip_norm": 0.1, "fp16": True}`` -> ``["--clip-norm", "0.1", "--fp16"]``."""
    out = []
    for key, value in options.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        else:
            out += [flag, str(value)]
    return out


# No device probing: fairseq uses a GPU when torch sees one and the CPU otherwise (gpus=0 forces
# the CPU), and the parent process never has to import torch (seconds per cell) to find out.
def train_command(bin_dir, save_dir, cell) -> list:
    """fairseq-train of a resolved cell (``posenc.harness.config.resolve.ResolvedCell``)."""
    spec, length = cell.spec, cell.length
    return [
        *train_program(), str(bin_dir),
        "--user-dir", str(PLUGIN_DIR),
        "--task", "translation", *language_flags(cell),
        "--arch", spec.arch,
        "--encoder-pos", spec.encoder_pos, "--decoder-pos", spec.decoder_pos,
        *flags(cell.model_args),
        *flags(cell.optim_args),
        "--max-tokens", str(cell.max_tokens),
        "--max-epoch", str(length.max_epoch),
        "--max-update", str(length.max_update),
        "--stop-time-hours", repr(cell.max_time_min / 60.0),
        "--seed", str(cell.seed),
        "--save-dir", str(save_dir),
        "--no-epoch-checkpoints",
        # Checkpoints often enough that an interruption loses little; the harness resumes from them.
        *(["--save-interval-updates", str(cell.save_interval_updates), "--keep-interval-updates", "1"]
          if cell.save_interval_updates else []),
        # fairseq #5036: with the default multiple of 8 the last valid batch can be dropped.
        "--required-batch-size-multiple", "1",
        "--log-format", "json", "--log-interval", "50",
        "--num-workers", "0",
        *train_flags(cell),  # precision and GPUs per cell (W&B is logged by the harness, not fairseq)
        *([DETERMINISTIC_FLAG] if cell.deterministic else []),  # runtime.deterministic (posenc.trainer.deterministic)
    ]


def language_flags(cell) -> list:
    """The pair of a user's data-bin (``data=binarized``): fairseq would take the first pair it finds in
    DIR, in the order its files name it. Every other corpus holds one pair, named as trained: none."""
    data = cell.data
    return ["--source-lang", data.src, "--target-lang", data.tgt] if data.databin else []


def generate_command(bin_dir, checkpoint, subset: str, remove_bpe: str, cell) -> list:
    gen = cell.generation
    return [
        sys.executable, *GENERATOR, str(bin_dir),
        "--user-dir", str(PLUGIN_DIR),
        "--task", "translation", *language_flags(cell),
        "--path", str(checkpoint),
        "--gen-subset", subset,
        "--beam", str(gen.beam),
        "--batch-size", str(gen.batch_size),
        "--required-batch-size-multiple", "1",  # fairseq #5036, as above
        "--max-len-a", str(gen.max_len_a), "--max-len-b", str(gen.max_len_b),
        *(["--post-process", remove_bpe] if remove_bpe else []),
        "--num-workers", "0",
        "--seed", str(cell.seed),
        *(["--cpu"] if cell.gpus == 0 else []),  # gpus=0: the CPU here too; generation runs in fp32 on one device
    ]


def commands_script(job_dir, env: dict, train_argv: list, generate_argvs: dict) -> str:
    """The cell's ``commands.sh``: the exact fairseq command lines, and every variable the harness
    sets for them (the rest of the environment is the caller's, as for the harness's own run)."""
    lines = ["#!/usr/bin/env bash",
             "# The fairseq commands of this cell, to rerun it by hand: the same command lines and the same",
             "# variables the harness set (posenc/harness/config/environment.py); "
             "the rest of the environment is yours.",
             "set -euo pipefail",
             f"cd {shlex.quote(str(job_dir))}"]
    lines += [f"export {key}={shlex.quote(str(value))}" for key, value in env.items()]
    lines.append(shlex.join(train_argv))
    lines += [f"{shlex.join(argv)} > {shlex.quote(f'generate-{split}.log')}" for split, argv in generate_argvs.items()]
    return "\n".join(lines) + "\n"
