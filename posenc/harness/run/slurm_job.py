"""A cell inside a SLURM job: why it was stopped, and what happens to the job afterwards.

SLURM stops a job in four ways, and the job's processes see only two signals:

- the time limit is near: submitit's ``--signal=USR2@signal_delay_s`` (SIGUSR2 to every process);
- the scheduler requeues it (preemption, ``scontrol requeue``): SIGTERM, and SLURM starts it again;
- ``scancel``: SIGTERM, and the job is over;
- the time limit itself: SIGTERM, then SIGKILL ``KillWait`` seconds later.

A requeue and a cancellation are told apart by the job's restart count, which SLURM raises before
it signals a requeued job (``scontrol show job``; no accounting needed).

After the cell has saved and recorded its interruption, ``hand_over`` lets the job end the way
SLURM and submitit expect: on the time-limit warning, submitit's own handler checkpoints the
launcher's call and requeues the job; on a requeue, the process exits without a result, so that
the submitter waits for the requeued job instead of taking this run as the cell's end.
"""

import os
import re
import signal
import subprocess
import sys

from posenc.harness.run import slurm_group
from posenc.harness.run.signals import STOP

TIME_LIMIT = "SLURM time limit: requeued"
PREEMPTED = "SLURM preemption: requeued"
CANCELLED = "cancelled (scancel)"
AT_LIMIT = "SLURM time limit reached (SIGTERM at the limit: the warning came too late)"


def job_id(environ=None) -> str:
    """This process's SLURM job (``123_4`` for an array element), or "" outside SLURM."""
    environ = os.environ if environ is None else environ
    if environ.get("SLURM_ARRAY_JOB_ID") and environ.get("SLURM_ARRAY_TASK_ID"):
        return f"{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"
    return environ.get("SLURM_JOB_ID", "")


def job_info(jid: str) -> dict:
    """``scontrol show job``'s fields of job ``jid`` (``{}`` where scontrol does not answer)."""
    try:
        out = subprocess.run(["scontrol", "show", "job", jid], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(re.findall(r"(\w+)=(\S*)", out))


def _seconds(duration: str):
    """SLURM's ``[days-]hh:mm:ss`` in seconds, or None."""
    found = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", duration or "")
    if not found:
        return None
    days, hours, minutes, secs = (int(x or 0) for x in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


def sigterm_cause(info: dict, environ=None) -> str:
    """Why SLURM sent SIGTERM, from the job's own fields: its restart count went up (a requeue),
    it ran into its time limit, or else it was cancelled."""
    environ = os.environ if environ is None else environ
    restarts = info.get("Restarts")
    if restarts is not None and restarts.isdigit() and int(restarts) > int(environ.get("SLURM_RESTART_COUNT") or 0):
        return PREEMPTED
    run, limit = _seconds(info.get("RunTime", "")), _seconds(info.get("TimeLimit", ""))
    if run is not None and limit is not None and run >= limit:
        return AT_LIMIT
    return CANCELLED


def stop_cause(signum: int) -> str:
    """What a signal to a cell means: the SLURM event where it came from one, else the signal's name."""
    name = signal.Signals(signum).name
    if not job_id():
        return f"interrupted by {name}"
    if signum == signal.SIGUSR2 and STOP.submitit_usr2 is not None:
        return TIME_LIMIT
    if signum == signal.SIGTERM:
        return sigterm_cause(job_info(job_id()))
    return f"interrupted by {name}"


def requeues(cause: str) -> bool:
    return cause in (TIME_LIMIT, PREEMPTED)


def hand_over(interrupted: bool, cause: str) -> str:
    """End this SLURM job as its stop asks, once the cell's record is written (``interrupted``: it
    says so, or the cell has none): requeue it (the time-limit warning: submitit's handler, which
    exits), or exit without a result (a requeue by SLURM). Returns "" when the job simply ends (a
    cancellation; a cell not requeued), or submitit's refusal of the requeue (``max_num_timeout``
    used up), for the cell's record to say (``posenc.harness.run.records.not_requeued``)."""
    if not interrupted or not requeues(cause):
        return ""
    for signum in (signal.SIGTERM, signal.SIGUSR2):  # the requeue's own SIGTERM, a repeated warning: we are leaving
        signal.signal(signum, signal.SIG_IGN)
    if cause == PREEMPTED:
        sys.exit(STOP.exit_status())  # SLURM starts the job again; no result, so the submitter keeps waiting
    if slurm_group.tasks() > 1:  # several cells in this array task: the last of them to save requeues it
        return slurm_group.requeue_together(lambda: STOP.submitit_usr2(signal.SIGUSR2, None))
    from submitit.core.utils import UncompletedJobError
    try:
        STOP.submitit_usr2(signal.SIGUSR2, None)  # checkpoint the launcher's call, scontrol requeue, exit
    except UncompletedJobError as refused:
        return str(refused)
    return ""
