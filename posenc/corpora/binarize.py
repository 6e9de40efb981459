"""Binarization with fairseq-preprocess, run as a subprocess with an argument list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .errors import CorpusError


def preprocess_command(
    src: str,
    tgt: str,
    text_dir: Path,
    dest_dir: Path,
    test_prefixes: list[str],
    joined_dictionary: bool,
    workers: int,
) -> list[str]:
    """The fairseq-preprocess argument list (subsets train, valid, test, test1, ...)."""
    args = [
        sys.executable, "-m", "fairseq_cli.preprocess",
        "--source-lang", src,
        "--target-lang", tgt,
        "--trainpref", str(text_dir / "train"),
        "--validpref", str(text_dir / "valid"),
        "--testpref", ",".join(str(text_dir / prefix) for prefix in test_prefixes),
        "--destdir", str(dest_dir),
        "--workers", str(max(1, workers)),
    ]
    if joined_dictionary:
        args.append("--joined-dictionary")
    return args


def run_preprocess(args: list[str], log_file: Path) -> None:
    with open(log_file, "w", encoding="utf-8") as log:
        proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        lines = [line for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "no output"
        raise CorpusError(
            f"fairseq-preprocess failed (exit {proc.returncode}): {last} (full log: {log_file})"
        )


def subset_names(test_splits: list[str]) -> dict[str, str]:
    """fairseq names the test prefixes test, test1, test2, ... in --testpref order."""
    return {split: ("test" if i == 0 else f"test{i}") for i, split in enumerate(test_splits)}
