"""Resumable downloads with checksums (http(s) with Range requests, and file:// URLs)."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from .errors import CorpusError
from .textio import file_sha256

_BLOCK = 1 << 20


def download(
    url: str,
    dest: Path,
    sha256: str | None = None,
    log: Callable[[str], None] = print,
    timeout: float = 60.0,
) -> Path:
    """Fetch `url` to `dest` unless it is already there; return `dest`.

    Bytes arrive in `<dest>.part`; a later call resumes it with an HTTP Range request (or a
    seek, for file:// URLs). The finished file is checked against `sha256` when one is known
    and only then renamed to `dest`, so `dest` is always complete.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if dest.is_file():
            return dest
        part = dest.with_name(dest.name + ".part")
        offset = part.stat().st_size if part.is_file() else 0
        if offset:
            log(f"resuming {url} at byte {offset}")
        else:
            log(f"downloading {url}")
        if urllib.parse.urlparse(url).scheme == "file":
            _fetch_file_url(url, part, offset)
        else:
            _fetch_http(url, part, offset, timeout)
        if sha256:
            actual = file_sha256(part)
            if actual != sha256.lower():
                part.unlink()
                raise CorpusError(
                    f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; "
                    f"the download was removed, run again to retry"
                )
        part.replace(dest)
        return dest


def _fetch_file_url(url: str, part: Path, offset: int) -> None:
    source = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    if not source.is_file():
        raise CorpusError(f"cannot download {url}: no such file {source}")
    if offset > source.stat().st_size:
        offset = 0  # the partial file is not a prefix of this source: start again
    with open(source, "rb") as src, open(part, "ab" if offset else "wb") as out:
        src.seek(offset)
        shutil.copyfileobj(src, out, _BLOCK)


def _fetch_http(url: str, part: Path, offset: int, timeout: float) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "posenc-corpora"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:
            return  # the partial file already holds every byte; the checksum decides
        raise CorpusError(f"cannot download {url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise CorpusError(
            f"cannot download {url}: {reason} (offline? put the file at "
            f"{part.with_suffix('')} by hand and run again)"
        ) from None
    with response:
        resumed = offset and response.status == 206
        expected = response.headers.get("Content-Length")
        expected = int(expected) if expected and expected.isdigit() else None
        received = 0
        # A server that ignores Range sends the whole file (200): start the file again.
        with open(part, "ab" if resumed else "wb") as out:
            try:
                while block := response.read(_BLOCK):
                    out.write(block)
                    received += len(block)
            except (OSError, urllib.error.URLError) as err:
                raise CorpusError(
                    f"download of {url} interrupted after {part.stat().st_size} bytes ({err}); "
                    f"run again to resume"
                ) from None
        if expected is not None and received < expected:
            raise CorpusError(
                f"download of {url} stopped at {received} of {expected} bytes; run again to "
                f"resume"
            )
