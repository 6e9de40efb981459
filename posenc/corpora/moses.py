"""Normalisation, tokenization and detokenization (sacremoses), one set of settings for all.

The same `TextSettings` tokenizes the training data, tokenizes references for tokenized BLEU
and detokenizes system output, so the three can never drift apart.
"""

from __future__ import annotations

import functools
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

from .errors import CorpusError

TOKENIZERS = ("moses", "none")
# Big corpora are tokenized in chunks on several processes; small ones in-process (no start-up).
_PARALLEL_MIN_LINES = 50_000
_CHUNK = 20_000


@dataclass(frozen=True)
class TextSettings:
    tokenizer: str = "moses"
    normalize_punct: bool = True
    lowercase: bool = False
    # `-a` in fairseq's WMT recipe: "well-known" -> "well @-@ known"; the detokenizer joins it.
    aggressive_dash_splits: bool = True

    def check(self) -> None:
        if self.tokenizer not in TOKENIZERS:
            raise CorpusError(
                f"data.tokenizer={self.tokenizer!r}: allowed values are {', '.join(TOKENIZERS)}"
            )

    def as_dict(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=8)
def _normalizer(lang: str):
    from sacremoses import MosesPunctNormalizer

    return MosesPunctNormalizer(
        lang=lang, pre_replace_unicode_punct=True, post_remove_control_chars=True
    )


@functools.lru_cache(maxsize=8)
def _tokenizer(lang: str):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)  # unknown codes fall back to the English rules


@functools.lru_cache(maxsize=8)
def _detokenizer(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def _tokenize_chunk(args) -> list[str]:
    lines, lang, settings = args
    out = []
    normalize = _normalizer(lang).normalize if settings.normalize_punct else None
    tokenize = _tokenizer(lang).tokenize if settings.tokenizer == "moses" else None
    for line in lines:
        # Any whitespace (tabs, \r, U+2028...) becomes one space: fairseq reads files in text
        # mode, where a stray \r would start a new line and break the pairing.
        line = " ".join(line.split())
        if normalize:
            line = " ".join(normalize(line).split())
        if tokenize and line:
            line = tokenize(
                line,
                escape=False,
                aggressive_dash_splits=settings.aggressive_dash_splits,
                return_str=True,
            )
            line = " ".join(line.split())
        if settings.lowercase:
            line = line.lower()
        out.append(line)
    return out


def tokenize_lines(
    lines: list[str], lang: str, settings: TextSettings, workers: int = 1
) -> list[str]:
    """Normalise, tokenize and (if the recipe says so) lowercase raw lines."""
    if workers <= 1 or len(lines) < _PARALLEL_MIN_LINES:
        return _tokenize_chunk((lines, lang, settings))
    chunks = [(lines[i : i + _CHUNK], lang, settings) for i in range(0, len(lines), _CHUNK)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return [line for part in pool.map(_tokenize_chunk, chunks) for line in part]


def detokenize_lines(lines: list[str], lang: str, settings: TextSettings) -> list[str]:
    """Turn tokenized text (after subword removal) back into raw text."""
    if settings.tokenizer != "moses":
        return [" ".join(line.split()) for line in lines]
    detok = _detokenizer(lang)
    return [detok.detokenize(line.split(), unescape=False) for line in lines]
