"""A user's own kinds file: a Python file that registers position kinds with ``register_kind``.

``posenc-run kinds_module=my_kinds.py`` loads it in the harness (to check ``pe=`` and to hash its
content), and hands its absolute path to fairseq's children in ``POSENC_KINDS_MODULE``, which the
plugin loads on import; ``posenc-pe`` loads it from the same variable. Each process runs a file at
most once, so a sweep's cells and a plugin imported twice never register a kind twice. Plain data
like ``posenc.kinds``: the file itself may import torch, never fairseq.
"""

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from posenc.kinds import kind_names

ENV = "POSENC_KINDS_MODULE"  # the fairseq children's (and posenc-pe's) counterpart of kinds_module=
ALLOWED = "a Python file that registers position kinds with posenc.kinds.register_kind"


class KindsFileError(ValueError):
    """A kinds file that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class KindsFile:
    path: Path        # absolute
    sha256: str       # of the file's content: a cell's hashes include it
    kinds: tuple      # the names it registered, in order


_LOADED = {}  # absolute path -> KindsFile or KindsFileError: each file runs once per process


def load_kinds_file(value) -> KindsFile:
    """Run the file ``value`` names (relative to the working directory) once, and return what it
    registered; KindsFileError for a missing file, one that fails, registers nothing, clashes with a
    registered name or imports fairseq."""
    shown = f"kinds_module={value}"
    path = Path(str(value)).expanduser().resolve()
    if not path.is_file():
        raise KindsFileError(f"{shown}: file not found ({path}); allowed: {ALLOWED}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    earlier = _LOADED.get(path)
    if isinstance(earlier, KindsFileError):
        raise earlier
    if earlier is not None:
        if earlier.sha256 != digest:
            raise KindsFileError(f"{shown}: the file changed after this process loaded it; run again")
        return earlier
    try:
        loaded = KindsFile(path, digest, _run(path, shown))
    except KindsFileError as err:
        _LOADED[path] = err
        raise
    _LOADED[path] = loaded
    return loaded


def _run(path: Path, shown: str) -> tuple:
    before = set(kind_names())
    had_fairseq = "fairseq" in sys.modules
    name = f"posenc_user_kinds_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up here
    try:
        spec.loader.exec_module(module)
    except ValueError as err:  # register_kind's own refusals: a clash, a family or an act not allowed
        raise KindsFileError(f"{shown}: {err}") from None
    except Exception as err:  # noqa: BLE001 (the user's code: any error, reported on one line)
        line = _line_in(err, path)
        raise KindsFileError(f"{shown}: {type(err).__name__}{line}: {err}".replace("\n", " ")) from None
    if not had_fairseq and "fairseq" in sys.modules:
        raise KindsFileError(f"{shown} imports fairseq; a kinds file needs posenc.kinds and torch only")
    new = tuple(k for k in kind_names() if k not in before)
    if not new:
        raise KindsFileError(f"{shown} registers no position kind; allowed: {ALLOWED}")
    return new


def _line_in(err: Exception, path: Path) -> str:
    if isinstance(err, SyntaxError) and err.lineno:
        return f" at line {err.lineno}"
    tb, line = err.__traceback__, None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at line {line}" if line else ""


def content_digest(value) -> str:
    """The sha256 of the file ``value`` names ("" when there is none): a cell's hashes take the
    file's content, not its path, so moving the file moves nothing and editing it reruns the cell."""
    path = Path(str(value)).expanduser().resolve()
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def load_from_environment():
    """The file ``POSENC_KINDS_MODULE`` names, loaded (None when unset): fairseq's children and
    posenc-pe call this before they read the registry."""
    value = os.environ.get(ENV)
    return load_kinds_file(value) if value else None
