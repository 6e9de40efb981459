"""One cell, end to end: corpus -> fairseq-train -> fairseq-generate -> BLEU -> result.json.

It runs on a ``ResolvedCell`` (``posenc.harness.config.resolve``), never on the config. A cell
resumes where it stopped (``posenc.harness.run.resume``), runs under a per-cell lock
(``posenc.harness.run.lock``) and records a signal to the harness as ``interrupted``
(``posenc.harness.run.signals``).
"""

import os
import re
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from posenc.atomic import write_json_atomic, write_text_atomic
from posenc.cells import layout
from posenc.cells.record import TIME_CAP, Record, is_interrupted, is_pruned, new_record
from posenc.corpora import prepare_corpus
from posenc.harness import machine
from posenc.harness.config.commands import commands_script, generate_command, train_command
from posenc.harness.config.environment import child_environment
from posenc.harness.config.precision import check_hardware
from posenc.harness.config.resolve import REDO_INEXACT
from posenc.harness.fairseq_logs import NEW_RUN, hypotheses_by_id, last_saved_update, resumed_from, training_fields
from posenc.harness.run import resume
from posenc.harness.run.decoding import TrainerDecoding
from posenc.harness.run.failures import SKIP_REASON, non_finite_loss, skipped_batch
from posenc.harness.run.lock import cell_lock
from posenc.harness.run.provenance import provenance
from posenc.harness.run.signals import StopRequested
from posenc.harness.run.slurm_job import requeues, stop_cause
from posenc.harness.run.step import StepFailed, run_step
from posenc.harness.tracking.progress import CellProgress
from posenc.harness.tracking.wandb_run import log_finished_cell, start_cell_run
from posenc.report.outputs import score_output


class IncompleteOutput(RuntimeError):
    """fairseq returned fewer (or other) sentences than the test set has."""


@dataclass
class Ran:
    """What running a cell gave its job: the record as written (None: the cell never started in
    this job), and what a signal that interrupted it meant (``slurm_job.stop_cause``), read once
    where it was caught, so that the job's end (``posenc.harness.app.cell_job``) hands over on the same."""
    record: Record = None
    stop_cause: str = ""


def finished_result(job_dir: Path, cell):
    """The cell's earlier record if it finished with this exact configuration, else None: ok and
    scored, or, for a tuning trial, ok (validated; a trial is never scored) or pruned. A record
    hashed before the optim group that proves the same configuration gets today's hash."""
    record = Record.read(job_dir)
    if record and cell.trial is not None:
        if not (record.ok or is_pruned(record)):
            return None
    elif not (record and record.ok and (job_dir / (record.hypotheses or layout.HYPOTHESES_FILE)).exists()):
        return None
    current = cell.hashes.recognised_config(record.config_hash)
    if not current:
        return None
    if record.config_hash != current:
        record.config_hash = current
        record.write(job_dir)
    return record


def run_cell(cell, job_dir: Path, progress: CellProgress, env: dict = None, pruning=None, ident=None,
             shared: bool = False) -> Ran:
    """Run (or find finished) one resolved cell (``posenc.harness.config.resolve``). Anything that
    goes wrong in training or decoding is recorded as a failed cell, with a one-line error; a
    signal to the harness is recorded as an interrupted cell; a corpus or machine refusal raises.
    ``env``: what cells side by side get on top of the user's environment (a thread share, their
    GPUs; ``posenc.harness.launch.parallel``). ``pruning``: a tuning trial's
    (``posenc.harness.run.pruning``), which may stop its training early: the record says pruned.
    ``ident``: how its W&B run names it (``tracking.wandb_run.CellIdentity``, from the job).
    ``shared``: the cell shares its GPU with others (``launch.sharing``): a batch fairseq drops for
    want of memory stops and fails it, to be run again alone from the start.
    Returns the record with what stopped it, if a signal did (``Ran``)."""
    # Everything the harness adds to fairseq's environment; commands.sh exports the same.
    env = {**cell.environment, **(env or {})}
    job_dir = Path(job_dir)
    with cell_lock(job_dir, progress.say):
        inexact = resume.inexact_training(job_dir) if cell.redo == REDO_INEXACT else ""
        if cell.redo is True or inexact:
            resume.start_over(job_dir)
            progress.say(f"redo={REDO_INEXACT}: {inexact}: starting afresh" if inexact else
                         "redo=true: starting afresh")
        else:
            earlier = finished_result(job_dir, cell)
            if earlier:
                progress.say(f"finished earlier: {outcome(earlier)}; kept")
                log_finished_cell(cell, job_dir, earlier, ident)  # logger=wandb: its run, once, from what it kept
                return Ran(earlier)
        return _run(cell, job_dir, env, progress, pruning, ident, shared)


def outcome(record: Record) -> str:
    """What a finished cell got, in a few words: its BLEU, or a tuning trial's validation loss."""
    if record.trial is None:
        return f"BLEU {record.bleu:.2f}"
    loss = "-" if record.valid_loss is None else f"{record.valid_loss:.3f}"
    return f"trial {record.trial} {record.status}, validation loss {loss}"


def _run(cell, job_dir: Path, env: dict, progress: CellProgress, pruning=None, ident=None, shared=False) -> Ran:
    check_hardware(cell, child_environment(env))
    started = time.monotonic()
    prepared = prepare_corpus(cell.data, cell.cache_dir, log=progress.say)
    # The record as the cell starts: running, its identity and hash, no scores yet.
    record = new_record(cell.identity, job_dir, cell.spec.family)
    record.config_hash, record.trial, record.deterministic = cell.hashes.config, cell.trial, cell.deterministic
    record.corpus = prepared.record()
    versions = provenance()
    write_json_atomic(job_dir / layout.PROVENANCE_FILE, versions)
    wandb_run = start_cell_run(cell, job_dir, record, versions["git_commit"], ident)  # logger=wandb; else nothing
    save_dir = job_dir / layout.CHECKPOINTS
    plan = resume.plan(job_dir, cell)  # (starting afresh clears the cell's old result)
    record.write(job_dir)  # running: a cell killed outright is seen as such, never as a finished one
    if plan.message:
        progress.say(plan.message)
    if cell.limits.note and plan.action != "score":
        progress.say(cell.limits.note)
    train_argv = train_command(prepared.bin_dir, save_dir, cell)
    # A tuning trial is never scored: its objective is the validation loss, and no test data enters tuning.
    splits = [] if cell.trial is not None else \
        ["test"] + (["test_long"] if cell.generation.test_long and "test_long" in prepared.subsets else [])
    generate_argvs = {split: generate_command(prepared.bin_dir, save_dir / layout.BEST, prepared.subsets[split],
                                              prepared.remove_bpe, cell) for split in splits}
    write_text_atomic(job_dir / layout.COMMANDS_FILE, commands_script(job_dir, env, train_argv, generate_argvs))
    # One GPU or the CPU: the trainer decodes the test split(s) itself once training ends (its start paid once).
    decoding = TrainerDecoding(job_dir, generate_argvs, enabled=cell.gpus <= 1)
    phase, cause = "fairseq-train", ""
    try:
        training = plan.training if plan.action == "score" else \
            train(cell, job_dir, progress, TrainStep(
                train_argv, env, each_line(progress.on_train_line, wandb_run.on_train_line),
                resuming=plan.action == "resume", pruning=pruning, shared=shared, decoding=decoding))
        record.update(training)
        for split, argv in generate_argvs.items():
            phase = f"fairseq-generate ({split})"
            scores = generate_and_score(split, argv, prepared, job_dir, cell.limits.other_s, env, decoding)
            record.scores(split, scores)
        record.succeed()
        scored = f"BLEU {record.bleu:.2f} (tokenized {record.tok_bleu:.2f})" if cell.trial is None else \
            f"{outcome(record)} (not scored on test)"
        progress.say(f"{scored} | valid ppl {record.valid_ppl:.2f}")
    except (StepFailed, IncompleteOutput) as err:
        stopped_or_failed(record, err, pruning, job_dir)
    except StopRequested as stop:
        cause = interrupted(record, stop, "fairseq-generate (in the trainer)" if decoding.began else phase, job_dir)
    except Exception as err:  # recorded, never lost: the traceback goes to error.log
        record.fail(f"{type(err).__name__}: {err}".splitlines()[0])
        write_text_atomic(job_dir / layout.ERROR_LOG, traceback.format_exc())
    finally:  # anything else (SystemExit, KeyboardInterrupt) leaves the record running, with its reason
        if record.ok:  # an unfinished cell keeps every checkpoint, to resume from
            tidy_checkpoints(save_dir, cell.keep_checkpoints)
        record.cell_wall_s = round(time.monotonic() - started, 1)
        record.write(job_dir)
        wandb_run.finish(record)
    say_outcome(progress, record)
    return Ran(record, cause)


def stopped_or_failed(record: Record, err: Exception, pruning, job_dir: Path) -> None:
    """A step that failed: pruned, where the study stopped it (finished, with the checkpoint it
    stopped at), else failed with the step's one-line error."""
    if pruning is None or not pruning.reason:
        record.fail(str(err))
        return
    record.update({k: v for k, v in training_fields(_train_log(job_dir)).items() if k != "stopped_by"})
    record.epochs = pruning.epoch  # (the save-and-stop logs the next epoch's first update as an epoch)
    record.train_wall_s = (resume.read_state(job_dir) or {}).get("train_wall_s")
    record.prune(pruning.reason)


def interrupted(record: Record, stop: StopRequested, phase: str, job_dir: Path) -> str:
    """Record a signal that stopped the cell; returns what it meant (``slurm_job.stop_cause``)."""
    cause = stop_cause(stop.signum)
    record.interrupt(interrupted_reason(cause, phase, job_dir))
    stuck = no_progress(job_dir) if phase == "fairseq-train" and requeues(cause) else ""
    if stuck:  # a requeue would start where this run did: fail instead of looping until the requeues run out
        record.fail(f"{cause.split(':')[0]}, but {stuck}; not requeued")
    return cause


def say_outcome(progress: CellProgress, record: Record) -> None:
    if is_interrupted(record):
        progress.say(f"INTERRUPTED: {record.error}")
    elif is_pruned(record):
        progress.say(f"PRUNED: {record.error}")
    elif not record.ok:
        progress.say(f"FAILED: {record.error}")


@dataclass
class TrainStep:
    """What fairseq-train runs with beside its cell: the command and its environment, who reads each
    line of its log (``on_line``), whether it resumes, a tuning trial's ``pruning``, whether the cell
    shares its GPU (``shared``) and the splits the trainer decodes once it ends (``decoding``)."""
    argv: list
    env: dict
    on_line: object
    resuming: bool = False
    pruning: object = None
    shared: bool = False
    decoding: TrainerDecoding = None


def train(cell, job_dir: Path, progress, step: TrainStep) -> dict:
    """fairseq-train, fresh or resumed from ``checkpoint_last.pt`` (fairseq's own restore; the log
    is appended to), then ``step.decoding``'s splits in the same process, within the cell's training
    limit. Returns the training's fields of the record (its wall time without the decoding)."""
    log = job_dir / layout.TRAIN_LOG
    resume.begin_training(job_dir, cell)
    spec = cell.spec
    progress.say(f"training {spec.arch} encoder={spec.encoder_pos} decoder={spec.decoder_pos}")
    decoding = step.decoding or TrainerDecoding(job_dir, {}, enabled=False)
    argv = decoding.train_argv(step.argv)
    started = time.monotonic()
    checks = [non_finite_loss] + ([skipped_batch] if step.shared else []) + \
        ([step.pruning.check] if step.pruning else [])
    try:
        try:
            run_step("fairseq-train", argv, log, decoding.step_limit(cell.limits.train_s, cell.limits.other_s),
                     each_line(decoding.on_line, step.on_line), env=step.env, append=step.resuming,
                     stop_if=first_reason(*checks), warm_start=cell.warm_trainer and cell.gpus <= 1)
        finally:
            wall = resume.add_training_time(job_dir, decoding.training_seconds(started))
    except StepFailed as err:
        if step.shared and SKIP_REASON in str(err):  # its checkpoints lack that batch: none of them is this cell's
            resume.start_over(job_dir)
        raise
    training = training_fields(log.read_text(encoding="utf-8", errors="replace").splitlines())
    if training["valid_ppl"] is None or not resume.intact(layout.best_checkpoint(job_dir)):
        raise StepFailed(f"fairseq-train ended without a validated checkpoint (log: {log})")
    training["train_wall_s"] = wall
    training.update(gpu_fields(training, step.env))
    if decoding.failure:
        progress.say(f"{decoding.failure}; fairseq-generate decodes instead")
    if training.get("stopped_by") == TIME_CAP:  # training's fields from fairseq's log, not yet a record
        progress.say(f"WARNING: training stopped at the time cap (budget.max_time_min={cell.max_time_min:g}) "
                     f"after {training['num_updates']} updates, in epoch {training['epochs']} of "
                     f"{cell.length.max_epoch}: this cell's scores depend on the machine's speed")
    resume.finish_training(job_dir, cell, training)
    return training


def gpu_fields(training: dict, env: dict) -> dict:
    """Which GPU(s) of the node a CUDA cell ran on (``machine.gpu_identity``: index and UUID, not only
    the model its ``device`` names), from the devices its slot gave it."""
    device = str(training.get("device"))
    if not device.startswith("cuda"):
        return {}
    visible = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    ranks = sum(int(n) for n in re.findall(r" x(\d+)", device)) or 1  # it trains on the first ``ranks`` of them
    return machine.gpu_identity(None if visible is None else ",".join(visible.split(",")[:ranks]))


def _train_log(job_dir: Path) -> list:
    log = job_dir / layout.TRAIN_LOG
    return log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []


def interrupted_reason(cause: str, phase: str, job_dir: Path) -> str:
    """``cause`` (``interrupted by SIGTERM``, ``SLURM time limit: requeued``, ...) and what is kept."""
    again = "the requeued job" if requeues(cause) else "a rerun"
    if phase != "fairseq-train":
        return f"{cause} during {phase}; training is finished: {again} scores it"
    saved = last_saved_update(_train_log(job_dir))
    if saved is None:
        return f"{cause} during {phase}, before its first checkpoint: {again} starts it afresh"
    return f"{cause} during {phase}; its checkpoint at update {saved} is kept: {again} resumes from it"


def no_progress(job_dir: Path) -> str:
    """Why the training run just stopped got nowhere (no checkpoint beyond the one it resumed
    from), or "" when it saved progress."""
    lines = _train_log(job_dir)
    saved, start = last_saved_update(lines), resumed_from(lines)
    runs = sum(NEW_RUN in line for line in lines)
    if saved is not None and saved > start:
        return ""
    if runs <= 1 and saved is None:
        return "no progress: stopped before its first checkpoint, in its first run"
    return f"no progress since the last requeue: stopped at update {saved or 0}, where it resumed from"


def first_reason(*checks):
    """One ``stop_if`` from several: the first reason any of ``checks`` gives for a line."""
    def stop_if(line: str):
        return next((reason for reason in (check(line) for check in checks) if reason), None)
    return stop_if


def each_line(*callbacks):
    """One ``on_line`` callback that hands every line to each of ``callbacks``."""
    def on_line(line: str) -> None:
        for callback in callbacks:
            callback(line)
    return on_line


def generate_and_score(split, argv, prepared, job_dir: Path, timeout_s: float, env: dict,
                       decoding: TrainerDecoding = None) -> dict:
    """Score ``split``'s output: the log the trainer wrote whole (``decoding``), else a fairseq-generate child's."""
    log = job_dir / layout.generate_log(split)
    if decoding is not None and decoding.decoded(split):
        seconds = decoding.seconds[split]
    else:
        seconds = run_step("fairseq-generate", argv, log, timeout_s, env=env)
    by_id = hypotheses_by_id(log.read_text(encoding="utf-8", errors="replace").splitlines())
    expected = prepared.test_sizes[split]
    if sorted(by_id) != list(range(expected)):
        raise IncompleteOutput(f"fairseq-generate returned {len(by_id)} of {expected} {split} sentences "
                               f"(log: {log}); refusing to score a partial output")
    tokenized = [by_id[i] for i in range(expected)]
    detokenized = prepared.detokenize(tokenized)
    references = prepared.references(split)
    name = layout.hypotheses_file(split)
    write_text_atomic(job_dir / name, "".join(line + "\n" for line in detokenized))
    write_text_atomic(job_dir / layout.hypotheses_file(split, tokenized=True),
                      "".join(line + "\n" for line in tokenized))
    scores = score_output(job_dir, name, detokenized, references, prepared.cache_key, split, prepared.lowercased,
                          tokenized, prepared.tokenize(references), on_tokenized=prepared.bleu_on == "tokenized")
    return {**scores, "test_sentences": expected, "hypotheses": name, "generate_wall_s": round(seconds, 1)}


def tidy_checkpoints(save_dir: Path, keep: str) -> None:
    if keep == "all" or not save_dir.exists():
        return
    if keep == "none":
        shutil.rmtree(save_dir, ignore_errors=True)
        return
    for path in save_dir.glob("checkpoint*.pt"):
        if path.name != layout.BEST:
            path.unlink(missing_ok=True)
