"""The fairseq command lines of a cell, as argument lists (never shell strings)."""

import shlex
import sys
from pathlib import Path

from posenc.harness.limits import run_length
from posenc.harness.precision import train_flags, train_program

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "fairseq_plugin"


def fairseq_tool(name: str) -> str:
    """The console script installed beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


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
def train_command(bin_dir, save_dir, spec, cfg, optim: dict) -> list:
    """``optim``: the fairseq flags of how the model is trained (``optim.args``)."""
    budget = cfg.budget
    length = run_length(cfg)
    return [
        *train_program(), str(bin_dir),
        "--user-dir", str(PLUGIN_DIR),
        "--task", "translation",
        "--arch", spec.arch,
        "--encoder-pos", spec.encoder_pos, "--decoder-pos", spec.decoder_pos,
        *flags(dict(cfg.model.args)),
        *flags(optim),
        "--max-tokens", str(budget.max_tokens),
        "--max-epoch", str(length.max_epoch),
        "--max-update", str(length.max_update),
        "--stop-time-hours", repr(float(budget.max_time_min) / 60.0),
        "--seed", str(cfg.seed),
        "--save-dir", str(save_dir),
        "--no-epoch-checkpoints",
        # Checkpoints often enough that an interruption loses little; the harness resumes from them.
        *(["--save-interval-updates", str(budget.save_interval_updates), "--keep-interval-updates", "1"]
          if budget.get("save_interval_updates", 0) else []),
        # fairseq #5036: with the default multiple of 8 the last valid batch can be dropped.
        "--required-batch-size-multiple", "1",
        "--log-format", "json", "--log-interval", "50",
        "--num-workers", "0",
        *train_flags(cfg),  # precision and GPUs per cell (W&B is logged by the harness, not fairseq)
    ]


def generate_command(bin_dir, checkpoint, subset: str, remove_bpe: str, cfg) -> list:
    gen = cfg.generation
    return [
        fairseq_tool("fairseq-generate"), str(bin_dir),
        "--user-dir", str(PLUGIN_DIR),
        "--task", "translation",
        "--path", str(checkpoint),
        "--gen-subset", subset,
        "--beam", str(gen.beam),
        "--batch-size", str(gen.batch_size),
        "--required-batch-size-multiple", "1",  # fairseq #5036, as above
        "--max-len-a", str(gen.max_len_a), "--max-len-b", str(gen.max_len_b),
        *(["--post-process", remove_bpe] if remove_bpe else []),
        "--num-workers", "0",
        "--seed", str(cfg.seed),
        *(["--cpu"] if cfg.gpus == 0 else []),  # gpus=0: the CPU here too; generation runs in fp32 on one device
    ]


def commands_script(job_dir, env: dict, train_argv: list, generate_argvs: dict) -> str:
    """The cell's ``commands.sh``: the exact fairseq command lines, and every variable the harness
    sets for them (the rest of the environment is the caller's, as for the harness's own run)."""
    lines = ["#!/usr/bin/env bash",
             "# The fairseq commands of this cell, to rerun it by hand: the same command lines and the same",
             "# variables the harness set (posenc/harness/runtime.py); the rest of the environment is yours.",
             "set -euo pipefail",
             f"cd {shlex.quote(str(job_dir))}"]
    lines += [f"export {key}={shlex.quote(str(value))}" for key, value in env.items()]
    lines.append(shlex.join(train_argv))
    lines += [f"{shlex.join(argv)} > {shlex.quote(f'generate-{split}.log')}" for split, argv in generate_argvs.items()]
    return "\n".join(lines) + "\n"
