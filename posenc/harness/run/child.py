"""fairseq child processes that never outlive the harness and stop without tearing a checkpoint.

- Each child runs in its own session (its process group is killed as a whole) and asks Linux to
  SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``): a ``posenc-run`` killed with SIGKILL
  takes its trainer with it, so a rerun never races a leftover trainer.
- A stop (a signal to ``posenc-run``, a time limit) waits for a checkpoint save that fairseq has
  begun to finish, then sends SIGTERM to the group, then SIGKILL if it is still there.
"""

import os
import signal
import subprocess
import threading

from posenc.harness.fairseq_logs import save_began, save_ended
from posenc.harness.run.signals import HANDLED
from posenc.trainer.parent_death import die_with_parent
from posenc.trainer.stop import IGNORED, SAVE_AND_STOP

SAVE_GRACE_S = 120   # longest wait for a begun checkpoint save (a GPU-sized one takes seconds)
TERM_GRACE_S = 30    # from SIGTERM to SIGKILL


def child_setup(parent_pid: int):
    """The ``preexec_fn`` of a fairseq child: die with the parent; take the signals the parent
    held back while starting it (``signals.deferred``); ignore SLURM's time-limit warning (an
    ignored signal stays ignored across exec; the harness turns it into a save-and-stop)."""
    def setup():
        for signum in IGNORED:
            signal.signal(signum, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
        die_with_parent(parent_pid)
    return setup


def start(argv, env, stdout) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=stdout, stderr=subprocess.STDOUT, text=True, env=env, errors="replace",
                            start_new_session=True, preexec_fn=child_setup(os.getpid()))


def kill_group(proc: subprocess.Popen, signum=signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class GracefulStop:
    """Stops one child on request, never in the middle of a checkpoint save it has begun."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.reason = None        # why it was stopped ("SIGTERM", "time limit"), None if not
        self._saving = False
        self._timers = []

    def on_line(self, line: str) -> None:
        """Follow fairseq's log: a save in progress delays a stop until it ends."""
        if save_began(line):
            self._saving = True
        elif save_ended(line):
            self._saving = False
            if self.reason:
                self._terminate()

    def request(self, reason: str, at_once: bool = False) -> None:
        # No lock: this also runs inside a signal handler, which may interrupt the main thread anywhere.
        self.reason = self.reason or reason
        if at_once:
            kill_group(self.proc)
        elif not self._saving:
            self._terminate()
        else:
            self._later(SAVE_GRACE_S, self._terminate)

    def _terminate(self) -> None:
        kill_group(self.proc, SAVE_AND_STOP)  # the trainer saves at once and stops (posenc.trainer.stop)
        self._later(TERM_GRACE_S, kill_group, self.proc)

    def _later(self, seconds, fn, *args) -> None:
        timer = threading.Timer(seconds, fn, args)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
