"""The time-limit requeue of an array task that runs several cells (``hydra.launcher.cells_per_task``,
``posenc.harness.launch.slurm_groups``): one SLURM task, a process, per cell, all warned at once.

submitit requeues only from task 0, and at once: task 0 may have finished its own cell long before
the warning, and a requeue while the other cells still save cuts their saves short (the requeue's
SIGTERM, then SIGKILL). So each cell that saved marks it, waits (at most ``WAIT_S``) until every
other task of the array task has either marked or ended with its result, and the first to get the
lock requeues the array task for all of them; the others wait to be ended by the requeue, or to
read that submitit refused it (``max_num_timeout`` used up), which their records then say too.
"""

import os
import sys
import time
from pathlib import Path

from filelock import FileLock

from posenc.atomic import write_text_atomic
from posenc.harness.run.signals import STOP

WAIT_S = 120.0  # for the other cells to save: well inside the preset's signal_delay_s (180 s)
POLL_S = 1.0


def tasks(environ=None) -> int:
    """How many SLURM tasks (cells) this array task runs."""
    environ = os.environ if environ is None else environ
    return int(environ.get("SLURM_NTASKS") or 1)


def all_saved(marks: Path, result_of, rank: int, n: int) -> bool:
    """Whether every task but ``rank`` marked its save, or ended with its result (``result_of(r)``: its
    result file)."""
    return all((marks / f"saved.{r}").exists() or result_of(r).exists() for r in range(n) if r != rank)


def requeue_together(requeue) -> str:
    """Requeue this array task once all its cells saved. ``requeue()``: submitit's SIGUSR2 handler
    (checkpoint, ``scontrol requeue``, exit), which raises UncompletedJobError when it refuses.
    Returns the refusal (for the cell's record), or exits: the requeue ends this process."""
    import submitit
    from submitit.core.utils import JobPaths, UncompletedJobError
    env = submitit.JobEnvironment()
    rank, n, folder = env.global_rank, tasks(), os.environ["SUBMITIT_FOLDER"]
    marks = env.paths.folder / f"requeue-{env.job_id}-{os.environ.get('SLURM_RESTART_COUNT') or 0}"
    marks.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marks / f"saved.{rank}", "")
    deadline = time.monotonic() + WAIT_S
    while not all_saved(marks, lambda r: JobPaths(folder, job_id=env.job_id, task_id=r).result_pickle, rank, n):
        if time.monotonic() > deadline:
            break  # a task that does not answer must not cost the others their requeue
        time.sleep(POLL_S)
    with FileLock(str(marks / "requeue.lock")):
        first = not (marks / "requeuing").exists()
        if first:
            write_text_atomic(marks / "requeuing", str(rank))
    if first:
        os.environ[env._env["global_rank"]] = "0"  # submitit's handler requeues only as task 0
        try:
            requeue()
        except UncompletedJobError as refused:
            write_text_atomic(marks / "refused", str(refused))
            return str(refused)
        return ""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (marks / "refused").exists():
            return (marks / "refused").read_text(encoding="utf-8")
        time.sleep(POLL_S)
    sys.exit(STOP.exit_status())  # requeued by another cell of the task: no result, the submitter waits
