"""What a user needs to rerun a cell by hand: code version, package versions, command lines."""

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("posenc", "fairseq-fixed", "torch", "hydra-core", "omegaconf", "sacrebleu", "sacremoses",
            "subword-nmt", "sentencepiece", "numpy")
REPO = Path(__file__).resolve().parents[2]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def provenance() -> dict:
    return {"git_commit": git_commit(), "python": sys.version.split()[0], "platform": platform.platform(),
            "packages": package_versions()}
