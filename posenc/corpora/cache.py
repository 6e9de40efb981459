"""Content-addressed cache of prepared corpora, safe under concurrent jobs.

An entry is `<cache_root>/corpora/<name>-<key>`; it appears only by an atomic rename of a
fully built temp folder, under a file lock, so a reader sees a whole entry or none, and N jobs
of a sweep starting together build it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from .prepared import MANIFEST

# Bump when the pipeline's output changes for the same inputs, so old entries are not reused.
PIPELINE_VERSION = 1


def cache_key(payload: dict) -> str:
    blob = json.dumps({"pipeline": PIPELINE_VERSION, **payload}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def entry_dir(cache_root: Path, name: str, key: str) -> Path:
    return Path(cache_root) / "corpora" / f"{name}-{key[:20]}"


def get_or_build(entry: Path, build: Callable[[Path], None], log) -> tuple[Path, bool]:
    """Return (entry, built_now). `build(tmp)` must fill tmp and write the manifest last."""
    if (entry / MANIFEST).is_file():
        return entry, False
    entry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(entry) + ".lock"):
        if (entry / MANIFEST).is_file():  # another job built it while we waited
            return entry, False
        if entry.exists():  # no manifest: not ours to trust
            shutil.rmtree(entry)
        for stale in entry.parent.glob(f".tmp-{entry.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed build; we hold the lock
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".tmp-{entry.name}-"))
        try:
            build(tmp)
            os.rename(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return entry, True
