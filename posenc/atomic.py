"""Writing files so that readers never see half of one, and a crash never loses a finished one:
temp file in the same folder, fsync it, rename it over the target, fsync the folder.

Without the two fsyncs a rename can reach the disk before the data it names (a node that loses
power then shows an empty or truncated file under the new name); with them, after a crash the
file is either the old one or the whole new one.
"""

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


def fsync_dir(folder) -> None:
    """Make a rename or a new entry in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot sync a directory; the rename is still atomic
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's umask, read without setting it (os.umask can only be read by changing it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


@contextmanager
def atomic_file(path):
    """A binary handle on a temp file beside ``path`` that becomes ``path`` (synced) when the block
    ends without an error; on an error the temp file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a result is as readable as any new file
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes_atomic(path, data: bytes) -> None:
    with atomic_file(path) as handle:
        handle.write(data)


def copy_atomic(source, path) -> None:
    """Copy a (possibly large) file into place the same way, without reading it into memory."""
    with atomic_file(path) as handle, open(source, "rb") as src:
        shutil.copyfileobj(src, handle, 16 << 20)


def write_text_atomic(path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path, data) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
