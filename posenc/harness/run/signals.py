"""SIGTERM, SIGINT and SIGUSR2 to ``posenc-run`` (SLURM's preemption, time limit and ``scancel``, a
user's Ctrl-C): stop cleanly.

The first signal asks the running fairseq step to stop (it keeps its last checkpoint; see
``posenc.harness.run.child``), the cell is recorded as ``interrupted`` and no further cell of the
sweep starts; the sweep still writes its tables and exits non-zero. A second signal stops at once.

With Hydra's joblib launcher the cells run in worker processes. A signal to the whole process
group (Ctrl-C, ``kill -- -PGID``, SLURM) reaches them directly; one sent to ``posenc-run`` alone
(``kill PID``) would leave them training, orphaned, so every process forwards what it receives to
its joblib workers, and a worker takes the same signal arriving twice within ``SAME_STOP_S`` (group
delivery plus forwarding) as one.

Inside a SLURM job started by submitit, SIGUSR2 is submitit's warning that the time limit is near
(``signal_delay_s`` before it). submitit's own handler requeues the job at once and exits, which
would kill fairseq mid-update; here the warning first stops the cell like any other signal (fairseq
saves a checkpoint, the cell is recorded ``interrupted``), and only then is submitit's handler
called (``posenc.harness.run.slurm_job.hand_over``), which requeues the job.
"""

import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

# How a joblib (loky) worker process is started; posenc-run's cells run in such processes.
JOBLIB_WORKER = b"joblib.externals.loky.backend.popen_loky_posix"
SAME_STOP_S = 1.0

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)


class StopRequested(BaseException):
    """Raised where work must stop because of a signal (a BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` records it as a failure)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


class _Stop:
    """What this process has been asked to do; one per process (a signal is per process too)."""

    def __init__(self):
        self.signum = None       # the first signal received
        self.first_at = 0.0      # when (time.monotonic())
        self.child = None        # the running fairseq step's GracefulStop, if any
        self.interruptible = False  # inside a cell's work: a signal may raise there
        self.submitit_usr2 = None   # submitit's SIGUSR2 handler in a SLURM job (checkpoint and requeue)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def exit_status(self) -> int:
        return 128 + self.signum if self.signum else 0


STOP = _Stop()


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def joblib_workers(signum: int) -> list:
    """This process's joblib workers that handle ``signum``, i.e. that have run a cell. One that
    has not would die of the signal and take joblib down with it; left alone, it may still run
    one cell before the sweep ends."""
    me, found = str(os.getpid()), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            if ppid == me and JOBLIB_WORKER in (proc / "cmdline").read_bytes() and _catches(int(proc.name), signum):
                found.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def _forward(signum) -> None:
    for pid in joblib_workers(signum):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _handler(signum, frame):
    now = time.monotonic()
    if STOP.signum == signum and now - STOP.first_at < SAME_STOP_S:
        return  # one stop delivered twice: to the process group and forwarded by posenc-run
    first = STOP.signum is None
    if first:
        STOP.signum, STOP.first_at = signum, now
    _forward(signum)
    if STOP.child is not None:
        # Stop the running step; the step's own loop turns its end into StopRequested.
        STOP.child.request(f"{signal.Signals(signum).name}", at_once=not first)
        return
    if STOP.interruptible or not first:
        raise StopRequested(STOP.signum)
    # Between cells (Hydra's own code): only remember it; the next cell will not start.


def install() -> None:
    """Handle SIGTERM, SIGINT and SIGUSR2 (``HANDLED``) in this process (once; only the main thread may)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in HANDLED:
        previous = signal.getsignal(signum)
        if previous is not _handler:
            if signum == signal.SIGUSR2 and callable(previous):
                STOP.submitit_usr2 = previous
            signal.signal(signum, _handler)


@contextmanager
def interruptible():
    """A region of cell work where a signal with no fairseq step running raises StopRequested."""
    if STOP.requested:
        raise StopRequested(STOP.signum)
    STOP.interruptible = True
    try:
        yield
    finally:
        STOP.interruptible = False


@contextmanager
def deferred():
    """Hold the ``HANDLED`` signals back (they stay pending) while a child is started and registered,
    so that no signal lands between the two and leaves an untracked trainer behind."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
