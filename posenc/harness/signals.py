"""SIGTERM and SIGINT to ``posenc-run`` (SLURM's preemption, a user's Ctrl-C): stop cleanly.

The first signal asks the running fairseq step to stop (it keeps its last checkpoint; see
``posenc.harness.children``), the cell is recorded as ``interrupted`` and no further cell of the
sweep starts; the sweep still writes its tables and exits non-zero. A second signal stops at once.
"""

import signal
import threading
from contextlib import contextmanager

HANDLED = (signal.SIGTERM, signal.SIGINT)


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
        self.child = None        # the running fairseq step's GracefulStop, if any
        self.interruptible = False  # inside a cell's work: a signal may raise there

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def exit_status(self) -> int:
        return 128 + self.signum if self.signum else 0


STOP = _Stop()


def _handler(signum, frame):
    first = STOP.signum is None
    if first:
        STOP.signum = signum
    if STOP.child is not None:
        # Stop the running step; the step's own loop turns its end into StopRequested.
        STOP.child.request(f"{signal.Signals(signum).name}", at_once=not first)
        return
    if STOP.interruptible or not first:
        raise StopRequested(STOP.signum)
    # Between cells (Hydra's own code): only remember it; the next cell will not start.


def install() -> None:
    """Handle SIGTERM and SIGINT in this process (once; only the main thread may)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in HANDLED:
        if signal.getsignal(signum) is not _handler:
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
    """Hold SIGTERM and SIGINT back (they stay pending) while a child is started and registered,
    so that no signal lands between the two and leaves an untracked trainer behind."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
