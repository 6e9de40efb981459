"""Every path by which the SLURM code writes a cell record that is not ok names its reason, and the
reasons follow what SLURM says (no SLURM needed: its answers are given as ``scontrol`` prints them)."""

import json
import signal
from pathlib import Path

import pytest

from posenc.cells.record import Record
from posenc.harness.launch import slurm_launcher
from posenc.harness.launch.slurm_launcher import (
    TESTED_SUBMITIT_LAUNCHER,
    PosencSlurmLauncher,
    check_gpus,
    submitit_launcher_version_problem,
)
from posenc.harness.run import lifecycle, records, slurm_job
from posenc.harness.run.records import ended_without_result
from posenc.harness.run.signals import STOP

# fairseq's own log lines (a first run that saved at update 16, a second that resumed from it).
LOAD = "fairseq.checkpoint_utils | Preparing to load checkpoint ckpt/checkpoint_last.pt"
FIRST_RUN = [f"2026-12-01 08:27:40 | INFO | {LOAD}",
             "2026-12-01 08:27:40 | INFO | fairseq.trainer | No existing checkpoint found ckpt/checkpoint_last.pt",
             "2026-12-01 08:28:10 | INFO | fairseq.checkpoint_utils | Saved checkpoint ckpt/checkpoint_last.pt "
             "(epoch 6 @ 16 updates, score None) (writing took 0.2 seconds)"]
SECOND_RUN = [f"2026-12-01 08:29:40 | INFO | {LOAD}",
              "2026-12-01 08:29:41 | INFO | fairseq.trainer | Loaded checkpoint ckpt/checkpoint_last.pt "
              "(epoch 6 @ 16 updates)"]
SAVED_AGAIN = ["2026-12-01 08:30:20 | INFO | fairseq.checkpoint_utils | Saved checkpoint ckpt/checkpoint_last.pt "
               "(epoch 7 @ 19 updates, score None) (writing took 0.2 seconds)"]


def train_log(tmp_path, lines):
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_requeue_that_made_progress_and_one_that_did_not(tmp_path):
    assert lifecycle.no_progress(train_log(tmp_path, FIRST_RUN)) == ""
    assert lifecycle.no_progress(train_log(tmp_path, FIRST_RUN + SECOND_RUN + SAVED_AGAIN)) == ""
    assert lifecycle.no_progress(train_log(tmp_path, FIRST_RUN + SECOND_RUN)) == \
        "no progress since the last requeue: stopped at update 16, where it resumed from"
    assert lifecycle.no_progress(train_log(tmp_path, FIRST_RUN[:2])) == \
        "no progress: stopped before its first checkpoint, in its first run"


def test_interrupted_reasons_name_the_cause_and_what_is_kept(tmp_path):
    job = train_log(tmp_path, FIRST_RUN)
    assert lifecycle.interrupted_reason(slurm_job.TIME_LIMIT, "fairseq-train", job) == \
        "SLURM time limit: requeued during fairseq-train; its checkpoint at update 16 is kept: " \
        "the requeued job resumes from it"
    assert lifecycle.interrupted_reason(slurm_job.CANCELLED, "fairseq-train", job) == \
        "cancelled (scancel) during fairseq-train; its checkpoint at update 16 is kept: a rerun resumes from it"
    assert lifecycle.interrupted_reason("interrupted by SIGINT", "fairseq-generate (test)", job) == \
        "interrupted by SIGINT during fairseq-generate (test); training is finished: a rerun scores it"


def fields(restarts, run, limit):
    """``scontrol show job``'s fields of a job being stopped."""
    return {"JobState": "COMPLETING", "Restarts": restarts, "RunTime": run, "TimeLimit": limit}


@pytest.mark.parametrize("fields,restarted_before,cause", [
    (fields("1", "00:00:31", "00:10:00"), "0", slurm_job.PREEMPTED),
    (fields("2", "00:00:31", "00:10:00"), "1", slurm_job.PREEMPTED),
    (fields("1", "00:00:31", "00:10:00"), "1", slurm_job.CANCELLED),
    (fields("0", "00:01:00", "00:01:00"), None, slurm_job.AT_LIMIT),
    (fields("0", "1-00:00:02", "1-00:00:00"), None, slurm_job.AT_LIMIT),
    ({}, None, slurm_job.CANCELLED),  # scontrol did not answer: the safe reading (no requeue is promised)
])
def test_why_slurm_sent_sigterm(fields, restarted_before, cause):
    environ = {} if restarted_before is None else {"SLURM_RESTART_COUNT": restarted_before}
    assert slurm_job.sigterm_cause(fields, environ) == cause


def test_a_cell_stopped_before_training_began(tmp_path):
    from types import SimpleNamespace

    name = SimpleNamespace(identity={"placement": "both", "seed": 1}, family="fconv")

    def earlier(cell):
        cell.mkdir(exist_ok=True)
        Record(status="interrupted", placement="both", error="SLURM time limit: requeued during fairseq-train")\
            .write(cell)
        return cell
    failed = records.unstarted(name, earlier(tmp_path / "a"), slurm_job.TIME_LIMIT)  # a requeue would stop there
    assert failed.status == "failed" and failed.placement == "both"
    assert failed.error.startswith("SLURM time limit reached before training began")
    assert json.loads((tmp_path / "a" / "result.json").read_text())["status"] == "failed"  # written, once
    assert records.unstarted(name, earlier(tmp_path / "b"), slurm_job.PREEMPTED).status == "interrupted"
    (tmp_path / "c").mkdir()
    unstarted = records.unstarted(name, tmp_path / "c", slurm_job.CANCELLED)   # no earlier record: its identity
    assert (unstarted.status, unstarted.error, unstarted.seed) == \
        ("interrupted", "cancelled (scancel) before training began", 1)


def test_a_job_id_is_the_array_element_where_there_is_one():
    assert slurm_job.job_id({"SLURM_JOB_ID": "17", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "3"}) == "12_3"
    assert slurm_job.job_id({"SLURM_JOB_ID": "17"}) == "17" and slurm_job.job_id({}) == ""


def test_a_job_that_ended_without_a_result(tmp_path):
    never_started = tmp_path / "a"
    never_started.mkdir()
    ended_without_result(never_started, "12_2", "CANCELLED by 0", ["placement=none", "seed=2"])
    record = json.loads((never_started / "result.json").read_text())
    assert (record["status"], record["placement"], record["seed"]) == ("interrupted", "none", 2)
    assert record["error"] == "SLURM job 12_2 cancelled by 0 before the cell finished"

    requeued = tmp_path / "b"
    requeued.mkdir()
    (requeued / "result.json").write_text(json.dumps({"status": "interrupted", "placement": "both",
                                                      "error": "SLURM time limit: requeued during fairseq-train"}))
    ended_without_result(requeued, "12_1", "")  # no accounting: squeue no longer shows it
    record = json.loads((requeued / "result.json").read_text())
    assert record["status"] == "failed" and record["placement"] == "both"
    assert record["error"] == ("SLURM job 12_1 ended (its final state is unknown: this cluster keeps no accounting) "
                               "before the cell finished; the cell had said: SLURM time limit: requeued during "
                               "fairseq-train")

    finished = tmp_path / "c"
    finished.mkdir()
    (finished / "result.json").write_text(json.dumps({"status": "ok", "error": ""}))
    ended_without_result(finished, "12_0", "FAILED")
    assert json.loads((finished / "result.json").read_text()) == {"status": "ok", "error": ""}


def test_squeue_without_an_answer_judges_no_job(tmp_path, monkeypatch):
    """A busy slurmctld lets squeue time out, and a requeued job may drop out of squeue for a moment:
    neither is the job's end. The wait goes on until SLURM names a final state."""
    answers = iter([None, None, {}, {"17": "PENDING"}, {}, {"17": "FAILED"}])
    accounting = iter(["PENDING", "REQUEUED"])
    monkeypatch.setattr(slurm_launcher, "queue_states", lambda ids: next(answers))
    monkeypatch.setattr(slurm_launcher, "accounted_state", lambda jid: next(accounting))
    monkeypatch.setattr(slurm_launcher, "POLL_S", 0)
    cell = tmp_path / "cell"
    cell.mkdir()
    PosencSlurmLauncher._wait(object(), {"17": [(0, cell)]}, {})
    assert next(answers, "all read") == "all read" and next(accounting, "all read") == "all read"
    assert Record.read(cell).error == "SLURM job 17 failed before the cell finished"


def test_squeue_that_cannot_answer_gives_no_states(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Socket timed out' >&2\nexit 1\n")
    (fake / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    assert slurm_launcher.queue_states(["17"]) is None
    (fake / "squeue").write_text("#!/bin/sh\nexit 0\n")  # answered: none of these jobs is left
    assert slurm_launcher.queue_states(["17"]) == {}


def test_submitit_refusing_the_requeue_makes_a_failure_that_says_so(monkeypatch, tmp_path):
    from submitit.core.utils import UncompletedJobError

    def refuse(signum, frame):
        raise UncompletedJobError("Job not requeued because: timed-out too many times.")
    monkeypatch.setattr(STOP, "submitit_usr2", refuse)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR2)}
    try:
        record = Record(status="interrupted", error="SLURM time limit: requeued during fairseq-train")
        refusal = slurm_job.hand_over(True, slurm_job.TIME_LIMIT)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert refusal == "Job not requeued because: timed-out too many times." and record.status == "interrupted"
    records.not_requeued(record, tmp_path, refusal)   # the one writer says it, and writes it
    assert json.loads((tmp_path / "result.json").read_text())["error"] == record.error
    assert (record.status, record.error) == \
        ("failed", "SLURM time limit: requeued during fairseq-train; but not requeued: Job not requeued because: "
                   "timed-out too many times. (hydra.launcher.max_num_timeout); a rerun resumes it")


def test_a_sweep_over_gpus_is_refused_under_slurm(capsys):
    check_gpus([["placement=both", "gpus=2"]], 2)  # the one value the array gets
    with pytest.raises(SystemExit) as stop:
        check_gpus([["gpus=1"], ["gpus=2"]], 1)
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("posenc-run: error: gpus=2 in a SLURM sweep whose jobs all get "
                           "hydra.launcher.gpus_per_node=1")



# fairseq's own lines for each case (a list of device names per rank; none: a CPU run), one process,
# in a run's real order: the trainer's CUDA environment (fairseq/trainer.py), then fairseq_cli/train.py's
# "training on N devices", then the checkpoint loader's "Preparing to load checkpoint".
DEVICE_LOG = """
import json, sys, types
from fairseq_cli import train  # fairseq's log format, as in fairseq-train
from fairseq import utils
from fairseq.checkpoint_utils import logger as ckpt
for i, names in enumerate(json.loads(sys.argv[1])):
    print(f"=== case {i}", flush=True)
    envs = [types.SimpleNamespace(name=name, major=9, minor=0, total_memory_in_GB=139.8) for name in names]
    if envs:
        utils.CudaEnvironment.pretty_print_cuda_env_list(envs)
    train.logger.info("training on {} devices (GPUs/TPUs)".format(max(1, len(names))))
    ckpt.info("Preparing to load checkpoint x/checkpoint_last.pt")
    sys.stdout.flush()
"""
DEVICES = [([], "cpu"), (["NVIDIA H200"], "cuda: NVIDIA H200 x1"), (["NVIDIA H200"] * 2, "cuda: NVIDIA H200 x2"),
           (["NVIDIA A100-SXM4-80GB", "NVIDIA H200"], "cuda: NVIDIA A100-SXM4-80GB x1, NVIDIA H200 x1")]

# The start of a train.log of a cell of make table4's model on an H200 in fp16, as fairseq-fixed
# 0.12.3.1 writes it (issue 47; the rank line pads the name to 40 characters): the rank line comes
# before the run's "training on" and "Preparing to load checkpoint".
H200_LOG = (Path(__file__).parent / "fixtures" / "train_log_h200.log").read_text(encoding="utf-8")


def test_the_record_names_the_device_that_trained():
    """From the lines fairseq's own printers write (a GPU run), in a run's order, or their absence."""
    import subprocess
    import sys

    from posenc.harness.fairseq_logs import training_device
    proc = subprocess.run([sys.executable, "-c", DEVICE_LOG, json.dumps([names for names, _ in DEVICES])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cases = proc.stdout.split("=== case ")[1:]
    assert len(cases) == len(DEVICES)
    h200 = H200_LOG.splitlines()
    for text, (_, device) in zip(cases, DEVICES):
        lines = text.splitlines()
        assert [i for i, line in enumerate(lines) if "rank " in line or "training on" in line or
                "Preparing to load" in line][-1] == max(i for i, line in enumerate(lines) if "Preparing" in line)
        assert training_device(lines) == device
        assert training_device(h200 + lines) == device  # only the last run counts
        assert training_device(lines + h200) == "cuda: NVIDIA H200 x1"


def test_a_real_gpu_logs_line_order_names_its_gpu():
    """The rank line precedes "training on" and "Preparing to load checkpoint" (issue 47: it was lost)."""
    from posenc.harness.fairseq_logs import NEW_RUN, training_device, training_fields
    lines = H200_LOG.splitlines()
    order = [next(i for i, line in enumerate(lines) if text in line) for text in ("rank   0:", "training on", NEW_RUN)]
    assert order == sorted(order)
    assert training_device(lines) == "cuda: NVIDIA H200 x1"
    assert training_fields(lines)["device"] == "cuda: NVIDIA H200 x1"
    assert training_device(lines[:4]) == "cuda: NVIDIA H200 x1"  # cut before its "training on": what it showed


def test_hydra_submitit_launcher_is_the_version_whose_internals_the_slurm_launcher_copies(monkeypatch):
    # PosencSlurmLauncher builds the executor as this version's launch() does; pyproject.toml pins it.
    import hydra_plugins.hydra_submitit_launcher as hydra_submitit
    assert hydra_submitit.__version__ == TESTED_SUBMITIT_LAUNCHER, submitit_launcher_version_problem()
    assert submitit_launcher_version_problem() == ""
    monkeypatch.setattr(hydra_submitit, "__version__", "1.3.0")
    problem = submitit_launcher_version_problem()
    assert "1.3.0 is installed" in problem
    assert f"tested with hydra-submitit-launcher {TESTED_SUBMITIT_LAUNCHER} only" in problem
