"""``python -m posenc.trainer.warm FD``: a warm trainer, the fairseq-train of a slot of a sweep whose
imports (torch, fairseq, the trainer entry and its decoding) are paid once, not once per cell.

It imports everything ``python -m posenc.trainer.train`` imports before it reads its arguments, then
serves cells one at a time over the socket ``FD`` (``posenc.harness.run.warm`` is the harness's side):
for each, it forks a process that runs ``posenc.trainer.train.main`` on the cell's arguments, in the
cell's working directory and environment, with its output on the pipe the harness reads. It never
trains itself, so every cell starts from the same state: the one a fresh ``python -m
posenc.trainer.train`` reaches before it parses its arguments (tests/test_warm_trainer.py compares
the two, checkpoints and hypotheses, byte for byte). The harness starts a warm trainer only with the
cell's exact environment, since torch reads some variables (``OMP_NUM_THREADS``) at import.

No CUDA before a fork: this process imports torch and fairseq, and then lives, with
``CUDA_VISIBLE_DEVICES=""`` (``posenc.trainer.cuda_fork.hide_gpus``, which says why), so nothing it does
asks the CUDA runtime anything and no cell is forked from a process CUDA has marked; each cell's
process sets the cell's own environment (its ``CUDA_VISIBLE_DEVICES``) before ``main`` runs. What
fairseq took from the device count at import (the defaults of ``--distributed-world-size``,
``--distributed-num-procs``, ``--nprocs-per-node``) is then 1, not the cell's count; the cell's command
line sets ``--distributed-world-size`` always (``posenc.harness.config.commands.device_flags``, with
``--distributed-init-method`` for several GPUs, so fairseq infers nothing else from the count at
import), fairseq spawns its ranks by the device count at run time, and ``--nprocs-per-node`` only
serves SlowMo, which no cell uses: a forked cell trains as a cold one. A cell that finds itself in a
bad fork anyway is run again cold by the harness (``posenc.harness.run.step``).

Each cell runs in a session of its own (the harness stops it with a signal to its group), dies with
this process, which dies with the harness (``PR_SET_PDEATHSIG``), and this process leaves when the
harness closes the socket or after ``IDLE_S`` without a cell.

Protocol (one JSON message per packet): ``ready`` once imported; then per cell, the harness sends
``{"program", "argv", "env", "cwd"}`` with the pipe's write end, and the warm trainer answers ``{"pid"}`` once
the cell has its own session, then ``{"returncode"}`` (``subprocess``'s convention) when it ends.
"""

import signal  # isort: skip
import sys  # isort: skip

from posenc.trainer.cuda_fork import hide_gpus  # isort: skip
from posenc.trainer.stop import IGNORED  # isort: skip

if __name__ == "__main__":  # the warm trainer's own process, not a module that imports this one
    for _signum in IGNORED:  # SLURM's time-limit warning must not kill this process while it imports
        signal.signal(_signum, signal.SIG_IGN)
    hide_gpus()  # before torch is imported, for good: this process never touches CUDA (see the docstring)

# What a cold trainer imports before it parses its arguments; fairseq_train first (fairseq's log format).
import posenc.trainer.train as entry  # noqa: E402  isort: skip
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import socket  # noqa: E402
import traceback  # noqa: E402

import setproctitle  # noqa: E402

import posenc.trainer.fairseq_decode  # noqa: E402, F401  (the decoding in the trainer, imported once too)
from posenc.trainer.parent_death import die_with_parent  # noqa: E402

IDLE_S = 900          # a warm trainer nobody has asked for a cell this long leaves
MAX_MESSAGE = 1 << 20
NO_ENV = "SPT_NOENV"  # setproctitle: stay inside the argument area, leave the environment's alone
WARM_START_MARK = "posenc: warm start: this trainer was forked by the warm trainer (its imports paid once), pid"


def retitle(words: list) -> None:
    """Show ``words`` as this process's command line (``ps``, ``/proc/PID/cmdline``), joined as a
    shell would quote them: a cell's trainer then reads as the ``python -m posenc.trainer.train ...``
    it stands for. ``setproctitle`` writes it; ``SPT_NOENV``, set for the call only, keeps it inside
    the argument area the process started with (the harness reserves room: ``TITLE_ROOM`` of
    ``posenc.harness.run.warm``), so ``/proc/PID/environ`` stays the environment it started with and
    too long a title is cut. (setproctitle also names the process, ``/proc/PID/comm``, by the
    title's first 15 bytes.)"""
    kept = os.environ.get(NO_ENV)
    os.environ[NO_ENV] = "1"
    try:
        setproctitle.setproctitle(shlex.join(words))
    finally:
        if kept is None:
            del os.environ[NO_ENV]
        else:
            os.environ[NO_ENV] = kept


def send(sock, **message) -> None:
    sock.send(json.dumps(message).encode())


def serve(sock) -> None:
    """Fork one process per cell the harness sends, until it closes the socket or goes quiet."""
    sock.settimeout(IDLE_S)
    send(sock, ready=True)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
        except (TimeoutError, OSError):
            return
        if not data:  # the harness closed the socket
            return
        request = json.loads(data)
        started_r, started_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        warm = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(started_r)
            run_cell(request, fds[0], started_w, sock, warm)  # never returns
        os.close(started_w)
        os.close(fds[0])
        os.read(started_r, 1)  # the cell has its own session (or died): the harness may signal its group
        os.close(started_r)
        send(sock, pid=pid)
        _, status = os.waitpid(pid, 0)
        send(sock, returncode=os.waitstatus_to_exitcode(status))


def run_cell(request: dict, out_fd: int, started_w: int, sock, warm: int) -> None:
    """The cell's process (``warm``: the warm trainer's pid, its parent): what ``python -m
    posenc.trainer.train ARGV`` does after its imports."""
    code = 1
    try:
        sock.close()
        os.setsid()
        die_with_parent(warm)
        os.write(started_w, b"1")
        os.close(started_w)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        retitle([*request["program"], *argv])
        sys.argv = [entry.__file__, *argv]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        entry.install_handlers()
        print(f"{WARM_START_MARK} {os.getppid()}", flush=True)
        entry.main(argv)
        code = 0
    except SystemExit as end:  # as Python would: a number is the status, anything else is printed, status 1
        if end.code is None or isinstance(end.code, int):
            code = end.code or 0
        else:
            print(end.code, file=sys.stderr)
    except BaseException:  # as Python would: the traceback on stderr (the cell's log), status 1
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nothing left to say
                pass
        os._exit(code)


def main() -> None:  # (it dies with the harness already: child.child_setup, before exec)
    retitle(sys.orig_argv[:-1])  # without the room kept for the cells' titles
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock)
    finally:
        sock.close()


if __name__ == "__main__":
    main()
