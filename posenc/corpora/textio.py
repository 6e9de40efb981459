"""Reading raw parallel text (plain or gzip) strictly as UTF-8, and writing files atomically."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from posenc.atomic import write_text_atomic

from .errors import CorpusError


def open_binary(path: Path):
    """Open a raw file for reading bytes; `.gz` files are decompressed on the fly."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def iter_lines(path: Path) -> Iterator[str]:
    """Yield the lines of `path` without their line ending, decoded strictly as UTF-8.

    Lines are split on b"\\n" only (not on Unicode line separators, which str.splitlines would
    split on), so line numbers agree with `wc -l` and with the other side of the pair.
    """
    path = Path(path)
    try:
        with open_binary(path) as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise CorpusError(
                        f"{path}: line {number} is not valid UTF-8 (byte {err.start}: "
                        f"{raw[err.start:err.start + 1]!r}); corpora must be UTF-8 text"
                    ) from None
                yield text.rstrip("\n").rstrip("\r")
    except FileNotFoundError:
        raise CorpusError(f"corpus file not found: {path}") from None
    except (OSError, EOFError) as err:  # truncated or corrupt gzip, unreadable file
        raise CorpusError(f"{path}: cannot be read ({err})") from None


def read_lines(path: Path) -> list[str]:
    return list(iter_lines(path))


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def cached_sha256(path: Path, memo_file: Path | None) -> str:
    """sha256 of a file, remembered by (path, size, mtime) so a big raw corpus is hashed once.

    The memo is a small JSON file under the cache root; a changed file has a new size or mtime
    and is hashed again.
    """
    path = Path(path).resolve()
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    memo: dict = {}
    if memo_file is not None and memo_file.exists():
        try:
            memo = json.loads(memo_file.read_text())
        except (OSError, ValueError):
            memo = {}  # a damaged memo only costs a re-hash
    entry = memo.get(str(path))
    if entry and entry.get("stamp") == stamp:
        return entry["sha256"]
    digest = file_sha256(path)
    if memo_file is not None:
        memo[str(path)] = {"stamp": stamp, "sha256": digest}
        write_text_atomic(memo_file, json.dumps(memo, indent=1, sort_keys=True))
    return digest


def write_lines(path: Path, lines: Iterable[str]) -> int:
    """Write one line per item (atomically); returns the number of lines written."""
    lines = list(lines)
    for number, line in enumerate(lines, start=1):
        if "\n" in line or "\r" in line:
            # A line break inside a line would silently shift every later line out of parallel.
            raise CorpusError(f"{path}: line {number} contains a line break after processing")
    write_text_atomic(path, "".join(line + "\n" for line in lines))
    return len(lines)
