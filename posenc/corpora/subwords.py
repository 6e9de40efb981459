"""Subword segmentation: subword-nmt BPE or sentencepiece, joint or per language."""

from __future__ import annotations

import contextlib
import functools
import io
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import CorpusError

SUBWORD_KINDS = ("bpe", "sentencepiece", "none")
# What fairseq-generate's --post-process needs to undo each kind.
POST_PROCESS = {"bpe": "subword_nmt", "sentencepiece": "sentencepiece", "none": ""}
_PARALLEL_MIN_LINES = 50_000
_CHUNK = 20_000


@dataclass(frozen=True)
class SubwordSettings:
    kind: str = "bpe"
    size: int = 10000  # BPE: merge operations (as in fairseq's scripts); sentencepiece: vocab
    joint: bool = True  # one model learnt on both languages' training text
    bpe_min_frequency: int = 2

    def check(self) -> None:
        if self.kind not in SUBWORD_KINDS:
            raise CorpusError(f"data.subword={self.kind!r}: allowed values are {', '.join(SUBWORD_KINDS)}")
        if self.kind != "none" and self.size < 1:
            raise CorpusError(f"data.subword_size={self.size}: must be a positive integer")

    def as_dict(self) -> dict:
        return asdict(self)


def learn(
    settings: SubwordSettings,
    train: dict[str, list[str]],
    out_dir: Path,
    seed: int = 1,
    workers: int = 1,
) -> dict[str, Path]:
    """Learn the subword model(s) from tokenized training text; return {lang: model file}.

    Paths in the result are files inside `out_dir` (the same file for both languages when
    the model is joint).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if settings.kind == "none":
        return {}
    groups = {"joint": list(train)} if settings.joint else {lang: [lang] for lang in train}
    models: dict[str, Path] = {}
    for group, langs in groups.items():
        text_file = out_dir / f"learn.{group}.txt"
        with open(text_file, "w", encoding="utf-8") as handle:
            for lang in langs:
                for line in train[lang]:
                    handle.write(line + "\n")
        if settings.kind == "bpe":
            model = _learn_bpe(text_file, out_dir / f"bpe.{group}.codes", settings, workers)
        else:
            model = _learn_sentencepiece(text_file, out_dir / f"spm.{group}", settings, seed, workers)
        text_file.unlink()
        for lang in langs:
            models[lang] = model
    return models


def _learn_bpe(text_file: Path, codes: Path, settings: SubwordSettings, workers: int) -> Path:
    from subword_nmt.learn_bpe import learn_bpe

    # learn_bpe draws progress bars and notes on stderr; the pipeline logs its own summary.
    with open(text_file, encoding="utf-8") as infile, open(codes, "w", encoding="utf-8") as out, \
            contextlib.redirect_stderr(io.StringIO()):
        learn_bpe(
            infile, out, settings.size, min_frequency=settings.bpe_min_frequency,
            num_workers=max(1, workers),
        )
    return codes


def _learn_sentencepiece(
    text_file: Path, prefix: Path, settings: SubwordSettings, seed: int, workers: int
) -> Path:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=str(text_file),
        model_prefix=str(prefix),
        vocab_size=settings.size,
        model_type="bpe",
        character_coverage=1.0,
        hard_vocab_limit=False,  # a small corpus may not support the full size
        input_sentence_size=5_000_000,
        shuffle_input_sentence=True,
        random_seed=seed,
        num_threads=max(1, workers),
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


@functools.lru_cache(maxsize=4)
def _bpe(codes: str):
    from subword_nmt.apply_bpe import BPE

    with open(codes, encoding="utf-8") as handle:
        return BPE(handle)


@functools.lru_cache(maxsize=4)
def _spm(model: str):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=model)


def _apply_chunk(args) -> list[str]:
    kind, model, lines = args
    if kind == "bpe":
        bpe = _bpe(model)
        return [bpe.process_line(line).strip() for line in lines]
    sp = _spm(model)
    return [" ".join(sp.encode(line, out_type=str)) for line in lines]


def apply(
    settings: SubwordSettings, model: Path | None, lines: list[str], workers: int = 1
) -> list[str]:
    """Segment tokenized lines with a learnt model."""
    if settings.kind == "none":
        return list(lines)
    if workers <= 1 or len(lines) < _PARALLEL_MIN_LINES:
        return _apply_chunk((settings.kind, str(model), lines))
    chunks = [
        (settings.kind, str(model), lines[i : i + _CHUNK]) for i in range(0, len(lines), _CHUNK)
    ]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return [line for part in pool.map(_apply_chunk, chunks) for line in part]


def remove(kind: str, lines: list[str]) -> list[str]:
    """Undo segmentation exactly as fairseq's --post-process does (for tests and tools)."""
    if kind == "bpe":
        return [(line + " ").replace("@@ ", "").rstrip() for line in lines]
    if kind == "sentencepiece":
        return [line.replace(" ", "").replace("\u2581", " ").strip() for line in lines]
    return list(lines)
