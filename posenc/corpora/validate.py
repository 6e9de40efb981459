"""Checks on raw parallel input, each failing with one line that names the file and value."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import CorpusError
from .textio import read_lines

# Language codes end up in fairseq file names (train.de-en.de.bin) and sacremoses rules.
_LANG_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}$")


def check_languages(src: str, tgt: str) -> None:
    for key, code in (("data.src", src), ("data.tgt", tgt)):
        if not isinstance(code, str) or not _LANG_CODE.match(code):
            raise CorpusError(
                f"{key}={code!r}: a language code must be letters, digits or _ (e.g. de, en)"
            )
    if src == tgt:
        raise CorpusError(
            f"data.src and data.tgt are both {src!r}: source and target must be different "
            f"languages"
        )


def resolve_file(prefix: str | Path, lang: str) -> Path:
    """`<prefix>.<lang>`, or `<prefix>.<lang>.gz` when only the gzipped file exists."""
    plain = Path(f"{prefix}.{lang}").expanduser()
    if plain.is_file():
        return plain
    gzipped = Path(f"{plain}.gz")
    if gzipped.is_file():
        return gzipped
    raise CorpusError(f"corpus file not found: {plain} (nor {gzipped.name})")


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Both sides of one split, strictly decoded; refuses different line counts and no lines."""
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise CorpusError(
            f"line counts differ: {src_path} has {len(src_lines)} lines, {tgt_path} has "
            f"{len(tgt_lines)}; the two sides of a parallel corpus must have one line per "
            f"sentence pair"
        )
    if not src_lines or all(not s.strip() and not t.strip() for s, t in zip(src_lines, tgt_lines)):
        raise CorpusError(
            f"empty corpus: {src_path} and {tgt_path} have no text ({len(src_lines)} lines)"
        )
    return src_lines, tgt_lines


def check_not_identical(src_path: Path, tgt_path: Path, src_lines, tgt_lines) -> None:
    """Same text on both sides is a wrong file, not a translation task."""
    if src_lines == tgt_lines:
        raise CorpusError(
            f"same text on both sides: {src_path} and {tgt_path} are identical; the target "
            f"must be a translation of the source"
        )
