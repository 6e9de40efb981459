"""Running one fairseq step as a child process: logged, time-boxed, streamed line by line,
stoppable by a signal to the harness, and never left running behind it."""

import subprocess
import threading
import time
from pathlib import Path

from posenc.harness.config.environment import child_environment
from posenc.harness.run import child, warm
from posenc.harness.run.failures import exit_reason
from posenc.harness.run.signals import STOP, StopRequested, deferred
from posenc.trainer import cuda_fork


class StepFailed(RuntimeError):
    """A fairseq step exited non-zero, ran out of time or was stopped; the message is one line."""


def run_step(name: str, argv: list, log_path: Path, timeout_s: float = 0, on_line=None, env: dict = None,
             append: bool = False, stop_if=None, warm_start: bool = False) -> float:
    """``run_once``; a warm-started trainer that finds itself in a bad fork (``cuda_fork``: CUDA was
    touched in the warm trainer after all) runs again cold, once, after a line in its log saying why,
    and this process's later cells with that environment start cold."""
    started = time.monotonic()
    offset = Path(log_path).stat().st_size if append and Path(log_path).exists() else 0
    try:
        return run_once(name, argv, log_path, timeout_s, on_line, env, append, stop_if, warm_start)
    except StepFailed:
        if not (warm_start and warm.warmable(argv)) or not _bad_fork(log_path, offset):
            raise
    why = (f"posenc: {name}: the warm trainer's fork of this trainer failed ({cuda_fork.BAD_FORK}); "
           "it runs again cold, once, and the rest of this worker's cells start cold")
    warm.SLOT.refuse(child_environment(env or {}), f"a forked trainer failed ({cuda_fork.BAD_FORK})")
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(why + "\n")
    if on_line:
        on_line(why + "\n")
    run_once(name, argv, log_path, timeout_s, on_line, env, True, stop_if, False)
    return time.monotonic() - started


def _bad_fork(log_path: Path, offset: int) -> bool:
    with open(log_path, encoding="utf-8", errors="replace") as log:
        log.seek(offset)
        return cuda_fork.bad_fork(log.read().splitlines())


def run_once(name: str, argv: list, log_path: Path, timeout_s: float = 0, on_line=None, env: dict = None,
             append: bool = False, stop_if=None, warm_start: bool = False) -> float:
    """Run ``argv`` in the user's environment with ``env`` (the harness's variables, see
    ``posenc.harness.config.environment``) on top, and nothing else; every output line goes to ``log_path``
    (appended to with ``append``) and to ``on_line``. ``stop_if(line)`` may return a reason to stop
    the step (a diverging loss). ``warm_start``: the trainer is forked by this process's warm trainer
    (``posenc.harness.run.warm``), its imports paid once per slot. Returns wall seconds.

    Raises StepFailed naming the step and why (exit status, time limit, ``stop_if``'s reason) and
    the log file; StopRequested when a signal to this process stopped it.
    """
    started = time.monotonic()
    full_env = child_environment(env or {})
    start = warm.starter(full_env) if warm_start and warm.warmable(argv) else child.start  # (may wait for imports)
    # Line-buffered: the log is whole up to the last line even when the harness is killed outright.
    with open(log_path, "a" if append else "w", encoding="utf-8", buffering=1) as log:
        with deferred():  # no signal between starting the child and registering it
            if STOP.requested:
                raise StopRequested(STOP.signum)
            proc = start(argv, full_env, subprocess.PIPE)
            stopper = STOP.child = child.GracefulStop(proc)
        limit = threading.Timer(timeout_s, stopper.request, ("time limit",)) if timeout_s and timeout_s > 0 else None
        if limit:
            limit.daemon = True
            limit.start()
        stop_reason = None
        try:
            for line in proc.stdout:
                stopper.on_line(line)  # before the log shows the line: a stop sent on seeing it must see the save
                log.write(line)
                if on_line:
                    on_line(line)
                if stop_if and stop_reason is None:
                    stop_reason = stop_if(line)
                    if stop_reason:
                        stopper.request(stop_reason)
            proc.wait()
        except BaseException:  # anything unexpected here: never leave fairseq running behind
            child.kill_group(proc)
            proc.wait()
            raise
        finally:
            STOP.child = None
            stopper.close()
            if limit:
                limit.cancel()
            log.flush()
    if proc.returncode == 0:  # finished, even if a stop came too late to matter
        return time.monotonic() - started
    if stopper.reason == "time limit":
        raise StepFailed(f"{name} exceeded its time limit of {timeout_s / 60:.1f} min; the cell's checkpoints are "
                         f"kept for a rerun (log: {log_path})")
    if stopper.reason and stopper.reason == stop_reason:
        raise StepFailed(f"{name} stopped: {stop_reason} (log: {log_path})")
    if stopper.reason:  # a signal to this process
        raise StopRequested(STOP.signum)
    lines = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
    raise StepFailed(f"{exit_reason(name, proc.returncode, lines)} (log: {log_path})")
