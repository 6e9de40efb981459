"""The harness's side of a warm trainer (``posenc.trainer.warm``): a cell's start paid once per slot.

A harness process (posenc-run, or a joblib worker that runs cell after cell) keeps one warm trainer
for the environment its cells train in; a cell whose environment differs (another GPU, another
thread share, a variable the user changed) gets a new one, because torch reads some of those
variables when it is imported. ``start`` returns a ``WarmChild``, which the step runner uses as it
uses a ``subprocess.Popen``: ``pid`` (its own process group), ``stdout``, ``wait()``,
``returncode``. Where no warm trainer can start, the step runs cold, as before, and says why once.
"""

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from posenc.harness.config.commands import train_program
from posenc.harness.run import child

READY_TIMEOUT_S = 300   # its imports take seconds; a machine under load may take a minute
MAX_MESSAGE = 1 << 20
PROGRAM = ("-m", "posenc.trainer.warm")
TITLE_ROOM = 16384  # bytes of command line (an argument of spaces) where a forked cell shows its own


class WarmUnavailable(RuntimeError):
    """No warm trainer could be started or reached (the message says why, in one line)."""


class WarmChild:
    """A cell's trainer forked by a warm trainer, seen as a ``subprocess.Popen``."""

    def __init__(self, pid: int, stdout, sock: socket.socket):
        self.pid, self.stdout, self._sock = pid, stdout, sock
        self.returncode = None

    def wait(self) -> int:
        if self.returncode is None:
            message = _receive(self._sock, "returncode")
            self.returncode = -9 if message is None else message["returncode"]  # its warm trainer was killed
            self.stdout.close()
        return self.returncode


class WarmTrainer:
    """One ``posenc.trainer.warm`` process, started with ``env``; serves one cell at a time."""

    def __init__(self, env: dict):
        self.env = env
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._errors = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen([sys.executable, *PROGRAM, str(theirs.fileno()), " " * TITLE_ROOM], env=env,
                                         stdin=subprocess.DEVNULL, stdout=self._errors, stderr=subprocess.STDOUT,
                                         pass_fds=(theirs.fileno(),), start_new_session=True,
                                         preexec_fn=child.child_setup(os.getpid()))
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(READY_TIMEOUT_S)
        if _receive(self.sock, "ready") is None:
            why = self._last_line()
            self.close()
            raise WarmUnavailable(f"the warm trainer did not start: {why}")
        self.sock.settimeout(None)

    def start(self, argv: list, env: dict, cwd: str = None) -> WarmChild:
        """Fork the cell's trainer (``argv``: the cell's ``python -m posenc.trainer.train ...``)."""
        read_end, write_end = os.pipe()
        try:
            try:
                program = train_program()
                request = {"program": list(argv[:len(program)]), "argv": list(argv[len(program):]), "env": env,
                           "cwd": cwd or os.getcwd()}
                socket.send_fds(self.sock, [json.dumps(request).encode()], [write_end])
            finally:
                os.close(write_end)
            started = _receive(self.sock, "pid")
        except OSError as err:
            os.close(read_end)
            raise WarmUnavailable(f"the warm trainer could not be reached: {err}") from None
        if started is None:
            os.close(read_end)
            raise WarmUnavailable(f"the warm trainer stopped: {self._last_line()}")
        stdout = open(read_end, errors="replace")  # as Popen(text=True, errors="replace") reads
        return WarmChild(started["pid"], stdout, self.sock)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()  # it leaves on seeing the socket closed; a cell it runs is stopped by its caller
        child.kill_group(self.proc, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill_group(self.proc)
            self.proc.wait()
        self._errors.close()

    def _last_line(self) -> str:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._errors.seek(0)
        lines = [line for line in self._errors.read().decode(errors="replace").splitlines() if line.strip()]
        status = f"exit status {self.proc.returncode}" if self.proc.returncode is not None else "no answer"
        return f"{lines[-1].strip()} ({status})" if lines else status


def _receive(sock: socket.socket, key: str):
    """The next message, which must hold ``key``; None where the other side has gone."""
    try:
        data = sock.recv(MAX_MESSAGE)
    except OSError:
        return None
    if not data:
        return None
    message = json.loads(data)
    return message if key in message else None


class _Slot:
    """This process's warm trainer (one: a harness process runs one cell at a time)."""

    def __init__(self):
        self.trainer = None
        self.lock = threading.Lock()
        self.said = False
        self.refused = {}  # why no warm trainer serves an environment any more (a bad fork in it)
        atexit.register(self.close)

    def refuse(self, env: dict, why: str) -> None:
        """No warm trainer for ``env`` from now on in this process: its cells start cold."""
        self.close()
        with self.lock:
            self.refused[json.dumps(env, sort_keys=True)] = why

    def trainer_for(self, env: dict) -> WarmTrainer:
        with self.lock:
            why = self.refused.get(json.dumps(env, sort_keys=True))
            if why:
                raise WarmUnavailable(why)
            if self.trainer is not None and (self.trainer.env != env or not self.trainer.alive()):
                self.trainer.close()
                self.trainer = None
            if self.trainer is None:
                self.trainer = WarmTrainer(env)
            return self.trainer

    def close(self) -> None:
        with self.lock:
            if self.trainer is not None:
                self.trainer.close()
                self.trainer = None


SLOT = _Slot()


def warmable(argv: list) -> bool:
    """Whether ``argv`` is the cell's trainer (``posenc.trainer.train``), which a warm trainer can run."""
    return list(argv[:len(train_program())]) == train_program()


def starter(env: dict, say=None):
    """``start(argv, env, stdout)`` for the step runner: the warm trainer's fork where ``env`` has
    (or can start) one, else ``child.start`` (cold), after one line on stderr saying why."""
    try:
        trainer = SLOT.trainer_for(env)
    except WarmUnavailable as err:
        _say_once(f"posenc: {err}; the trainer starts cold", say)
        return child.start

    def start(argv, env_, stdout):
        try:
            return trainer.start(argv, env_)
        except WarmUnavailable as err:
            SLOT.close()
            _say_once(f"posenc: {err}; the trainer starts cold", say)
            return child.start(argv, env_, stdout)
    return start


def _say_once(line: str, say=None) -> None:
    if not SLOT.said:
        SLOT.said = True
        (say or (lambda text: print(text, file=sys.stderr, flush=True)))(line)
