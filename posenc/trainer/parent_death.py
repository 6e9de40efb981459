"""A process that dies with its parent (Linux's ``PR_SET_PDEATHSIG``): the harness's fairseq children
and the cells its warm trainer forks, so that a ``posenc-run`` killed with SIGKILL leaves no trainer
behind to race its rerun. Kept outside the harness, since the warm trainer imports nothing of it."""

import ctypes
import ctypes.util
import os
import signal

PR_SET_PDEATHSIG = 1

try:  # resolved once, at import: a function that runs between fork and exec must not load anything
    _prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: the harness still kills its children on every exit it sees
    _prctl = None


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies; leave at once if ``parent_pid`` is already gone."""
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)
