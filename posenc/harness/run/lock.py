"""One run at a time per cell: two ``posenc-run`` processes that reach the same cell directory (two
sweeps started on the same sweep directory) never both train it; the second waits for the first,
then finds the cell finished and keeps it.

The lock is the operating system's (``flock`` through filelock): it goes with its process, even
one killed by SIGKILL, so a dead run never blocks a rerun. The owner file names the SLURM job that
holds the cell, if any, so that a rerun of a lost submitter waits for that job instead of
submitting the cell again (``posenc.harness.launch.slurm_launcher``).
"""

import os
import re
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from posenc.harness.run.slurm_job import job_id

LOCK_FILE = ".cell.lock"
OWNER_FILE = ".cell.owner"


@contextmanager
def cell_lock(job_dir: Path, say):
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(job_dir / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"another posenc-run ({_owner(job_dir)}) is running this cell; waiting for it to finish")
        started = time.monotonic()
        lock.acquire()
        say(f"the other run let go of this cell after {time.monotonic() - started:.0f}s")
    try:
        slurm = job_id()
        (job_dir / OWNER_FILE).write_text(f"pid {os.getpid()} on {socket.gethostname()}"
                                          + (f" in SLURM job {slurm}" if slurm else "") + "\n", encoding="utf-8")
        yield
    finally:
        lock.release()


def running_job(job_dir: Path) -> str:
    """The SLURM job that last took this cell (whether it still runs is SLURM's to say), or ""."""
    found = re.search(r"in SLURM job (\S+)", _owner(Path(job_dir)))
    return found.group(1) if found else ""


def _owner(job_dir: Path) -> str:
    try:
        return (job_dir / OWNER_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return "owner unknown"
