"""Running one fairseq step as a child process: logged, time-boxed, streamed line by line."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from posenc.harness.runtime import child_environment


class StepFailed(RuntimeError):
    """A fairseq step exited non-zero or ran out of time; the message is one line."""


def run_step(name: str, argv: list, log_path: Path, timeout_s: float = 0, on_line=None, env: dict = None) -> float:
    """Run ``argv`` in the user's environment with ``env`` (the harness's variables, see
    ``posenc.harness.runtime``) on top, and nothing else; every output line goes to ``log_path``
    and to ``on_line``. Returns wall seconds.

    Raises StepFailed naming the step, the exit status (or the time limit) and the log file.
    """
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=child_environment(env or {}), start_new_session=True, errors="replace")
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            _kill_group(proc)

        timer = threading.Timer(timeout_s, kill) if timeout_s and timeout_s > 0 else None
        if timer:
            timer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                if on_line:
                    on_line(line)
            proc.wait()
        except BaseException:  # Ctrl-C or a killed sweep: never leave fairseq running behind
            _kill_group(proc)
            raise
        finally:
            if timer:
                timer.cancel()
    if timed_out.is_set():
        raise StepFailed(f"{name} exceeded its time limit of {timeout_s / 60:.1f} min (log: {log_path})")
    if proc.returncode != 0:
        raise StepFailed(f"{name} exited with status {proc.returncode}: {_last_error(log_path)} (log: {log_path})")
    return time.monotonic() - started


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _last_error(log_path: Path) -> str:
    lines = [ln.strip() for ln in Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"
