"""One cell, end to end: corpus -> fairseq-train -> fairseq-generate -> BLEU -> result.json."""

import os
import shutil
import time
import traceback
from pathlib import Path

from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic, write_text_atomic
from posenc.corpora import prepare_corpus
from posenc.harness.commands import as_shell, generate_command, train_command
from posenc.harness.fairseq_logs import hypotheses_by_id, training_summary
from posenc.harness.precision import check_gpu_settings, check_hardware
from posenc.harness.progress import CellProgress
from posenc.harness.provenance import provenance
from posenc.harness.records import HYPOTHESES_FILE, base_record, config_hash, read_result, write_result
from posenc.harness.scoring import detokenized_bleu, tokenized_bleu
from posenc.harness.spec import cell_spec
from posenc.harness.subprocess_step import StepFailed, run_step
from posenc.harness.wandb_run import check_logger, log_finished_cell, start_cell_run


class IncompleteOutput(RuntimeError):
    """fairseq returned fewer (or other) sentences than the test set has."""


def finished_result(job_dir: Path, cfg):
    """The cell's earlier result if it finished ok with this exact configuration, else None."""
    record = read_result(job_dir)
    if record and record.get("status") == "ok" and record.get("config_hash") == config_hash(cfg) \
            and (job_dir / record.get("hypotheses", HYPOTHESES_FILE)).exists():
        return record
    return None


def run_cell(cfg, job_dir: Path, progress: CellProgress, env: dict = None) -> dict:
    """Run (or find finished) one cell. Configuration and corpus errors raise; anything that goes
    wrong in training or decoding is recorded as a failed cell, with a one-line error. ``env``: what
    the fairseq children get on top of the user's environment (a thread share, their GPUs)."""
    spec = cell_spec(cfg)
    check_logger(cfg.logger)
    check_gpu_settings(cfg)
    child_env = dict(env or {})
    job_dir = Path(job_dir)
    earlier = finished_result(job_dir, cfg)
    if earlier:
        progress.say(f"finished earlier: BLEU {earlier['bleu']:.2f}; kept")
        log_finished_cell(cfg, job_dir, earlier)  # logger=wandb: its run, once, from what the cell kept
        return earlier

    check_hardware(cfg, dict(os.environ, **child_env))
    started = time.monotonic()
    prepared = prepare_corpus(cfg.data, Path(cfg.paths.cache_dir), log=progress.say)
    record = base_record(cfg, spec, job_dir)
    record["corpus"] = prepared.record()
    versions = provenance()
    write_json_atomic(job_dir / "provenance.json", versions)
    wandb_run = start_cell_run(cfg, job_dir, record, versions["git_commit"])  # logger=wandb; else does nothing
    save_dir = job_dir / "checkpoints"
    shutil.rmtree(save_dir, ignore_errors=True)  # a killed earlier attempt restarts from scratch
    budget = cfg.budget
    timeout_s = float(budget.step_timeout_min) * 60
    train_argv = train_command(prepared.bin_dir, save_dir, spec, cfg, OmegaConf.to_container(budget.optim[spec.family]))
    splits = ["test"] + (["test_long"] if cfg.generation.test_long and "test_long" in prepared.subsets else [])
    generate_argvs = {split: generate_command(prepared.bin_dir, save_dir / "checkpoint_best.pt", prepared.subsets[split],
                                              prepared.remove_bpe, cfg) for split in splits}
    env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", **child_env}
    write_text_atomic(job_dir / "commands.sh", "\n".join(
        ["#!/usr/bin/env bash", "# The fairseq commands of this cell, to rerun it by hand.", "set -euo pipefail",
         as_shell(train_argv, env)] + [as_shell(argv, env) + f" > generate-{s}.log" for s, argv in generate_argvs.items()]) + "\n")
    try:
        progress.say(f"training {spec.arch} encoder={spec.encoder_pos} decoder={spec.decoder_pos}")
        record["train_wall_s"] = round(run_step("fairseq-train", train_argv, job_dir / "train.log", timeout_s,
                                                each_line(progress.on_train_line, wandb_run.on_train_line),
                                                env=child_env), 1)
        summary = training_summary((job_dir / "train.log").read_text(encoding="utf-8", errors="replace").splitlines())
        if summary["valid_ppl"] is None or not (save_dir / "checkpoint_best.pt").exists():
            raise StepFailed(f"fairseq-train ended without a validated checkpoint (log: {job_dir / 'train.log'})")
        record.update(valid_ppl=summary["valid_ppl"], num_updates=summary["num_updates"],
                      epochs=summary["epochs"], best_epoch=summary["best_epoch"])
        for split, argv in generate_argvs.items():
            generate_started = time.monotonic()
            scores = generate_and_score(split, argv, prepared, job_dir, timeout_s, child_env)
            suffix = "" if split == "test" else f"_{split}"
            record.update({f"{k}{suffix}": v for k, v in scores.items()})
            record[f"generate_wall_s{suffix}"] = round(time.monotonic() - generate_started, 1)
        record["status"] = "ok"
        progress.say(f"BLEU {record['bleu']:.2f} (tokenized {record['tok_bleu']:.2f}) | valid ppl {record['valid_ppl']:.2f}")
    except (StepFailed, IncompleteOutput) as err:
        record["error"] = str(err)
    except Exception as err:  # recorded, never lost: the traceback goes to error.log
        record["error"] = f"{type(err).__name__}: {err}".splitlines()[0]
        write_text_atomic(job_dir / "error.log", traceback.format_exc())
    finally:
        tidy_checkpoints(save_dir, cfg.keep_checkpoints)
        record["cell_wall_s"] = round(time.monotonic() - started, 1)
        write_result(job_dir, record)
        wandb_run.finish(record)
    if record["status"] != "ok":
        progress.say(f"FAILED: {record['error']}")
    return record


def each_line(*callbacks):
    """One ``on_line`` callback that hands every line to each of ``callbacks``."""
    def on_line(line: str) -> None:
        for callback in callbacks:
            callback(line)
    return on_line


def generate_and_score(split, argv, prepared, job_dir: Path, timeout_s: float, env: dict = None) -> dict:
    log = job_dir / f"generate-{split}.log"
    run_step("fairseq-generate", argv, log, timeout_s, env=env)
    by_id = hypotheses_by_id(log.read_text(encoding="utf-8", errors="replace").splitlines())
    expected = prepared.test_sizes[split]
    if sorted(by_id) != list(range(expected)):
        raise IncompleteOutput(f"fairseq-generate returned {len(by_id)} of {expected} {split} sentences "
                               f"(log: {log}); refusing to score a partial output")
    tokenized = [by_id[i] for i in range(expected)]
    detokenized = prepared.detokenize(tokenized)
    references = prepared.references(split)
    bleu, signature = detokenized_bleu(detokenized, references, lowercase=prepared.lowercased)
    tok_bleu = tokenized_bleu(tokenized, prepared.tokenize(references), lowercase=prepared.lowercased)
    name = HYPOTHESES_FILE if split == "test" else f"hypotheses.{split}.txt"
    write_text_atomic(job_dir / name, "".join(line + "\n" for line in detokenized))
    write_text_atomic(job_dir / name.replace(".txt", ".tok.txt"), "".join(line + "\n" for line in tokenized))
    return {"bleu": round(bleu, 2), "bleu_signature": signature, "tok_bleu": round(tok_bleu, 2),
            "test_sentences": expected, "hypotheses": name}


def tidy_checkpoints(save_dir: Path, keep: str) -> None:
    if keep == "all" or not save_dir.exists():
        return
    if keep == "none":
        shutil.rmtree(save_dir, ignore_errors=True)
        return
    for path in save_dir.glob("checkpoint*.pt"):
        if path.name != "checkpoint_best.pt":
            path.unlink(missing_ok=True)
