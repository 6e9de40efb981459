"""What a user needs to rerun a cell by hand: code version, package versions, command lines."""

import json
import platform
import subprocess
import sys
from importlib import metadata

from posenc.confdir import CLONE
from posenc.harness import machine

PACKAGES = ("posenc", "fairseq-fixed", "torch", "hydra-core", "omegaconf", "sacrebleu", "sacremoses",
            "subword-nmt", "sentencepiece", "numpy")


def git_commit() -> str:
    """The clone's commit (``+dirty`` with uncommitted changes to tracked files); for an installed
    package, the commit pip recorded when it installed from a git URL; else "unknown". Git is asked
    only inside a clone: an installed package's directory may sit inside somebody else's repository."""
    if CLONE is None:
        return installed_commit()
    try:
        out = subprocess.run(["git", "-C", str(CLONE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(CLONE), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def installed_commit() -> str:
    """The commit in pip's ``direct_url.json`` (``pip install git+URL``), else "unknown"."""
    try:
        direct = json.loads(metadata.distribution("posenc").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return "unknown"
    return str(direct.get("vcs_info", {}).get("commit_id") or "unknown")


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def provenance() -> dict:
    """The versions a cell ran with, and the machine (its CPU and GPUs): beside the record, never in
    the config hash (``posenc.cells.keys``), so the same cell on another machine is the same cell."""
    return {"git_commit": git_commit(), "python": sys.version.split()[0], "platform": platform.platform(),
            "machine": machine.describe(), "packages": package_versions()}
