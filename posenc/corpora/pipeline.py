"""prepare_corpus: raw text -> tokenized -> filtered -> subwords -> fairseq binary, cached."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import binarize, binarized, filtering, subwords, synthetic
from .cache import cache_key, entry_dir, get_or_build
from .config import CorpusConfig, parse
from .errors import CorpusError
from .length_split import SIDES, split_by_length
from .moses import tokenize_lines
from .prepared import PreparedCorpus, load_prepared, write_manifest
from .recipes import RECIPES, recipe_raw_files
from .textio import cached_sha256, write_lines
from .validate import check_not_identical, read_parallel, resolve_file

SPLIT_ORDER = ("train", "valid", "test", "test_long")
TEST_SPLITS = ("test", "test_long")
Pairs = dict[str, tuple[list[str], list[str]]]  # split -> (source lines, target lines)


def prepare_corpus(
    data_cfg: Any, cache_root: Path, log: Callable[[str], None] = print
) -> PreparedCorpus:
    """Prepare (or find in the cache) the binarized corpus described by the `data` node.

    Raises CorpusError, whose message is one line, for any bad input.
    """
    cfg = parse(data_cfg)
    cache_root = Path(cache_root).expanduser().resolve()
    # A user's data-bin (data=binarized) is trained on as it is: its entry holds what scoring needs.
    fingerprint, load_raw = (binarized.fingerprint(cfg, cache_root), None) if cfg.databin else \
        _raw_source(cfg, cache_root, log)
    key = cache_key({"raw": fingerprint, "preprocessing": cfg.preprocessing()})
    entry = entry_dir(cache_root, cfg.name, key)

    def build(tmp: Path) -> None:
        started = time.monotonic()
        log(f"corpus {cfg.name}: preparing into {entry}")
        if cfg.databin:
            binarized.build(cfg, key, tmp, log)
        else:
            _build(cfg, key, load_raw(), tmp, log)
        log(f"corpus {cfg.name}: ready in {time.monotonic() - started:.1f}s")

    entry, built = get_or_build(entry, build, log)
    if not built:
        log(f"corpus {cfg.name}: cache hit {entry}")
    prepared = load_prepared(entry)
    # the data-bin where it is now: its content is the key's, wherever it was when the entry was made
    return replace(prepared, bin_dir=cfg.databin.dir) if cfg.databin else prepared


# -- where the raw text comes from ----------------------------------------------------------
def _raw_source(cfg: CorpusConfig, cache_root: Path, log):
    """Return (fingerprint for the cache key, function loading the raw pairs of every split)."""
    if cfg.recipe == "synthetic":
        generator_source = Path(synthetic.__file__).read_bytes()
        fingerprint = {
            "generator": cfg.generator.__dict__,
            # the grammar's own code: changing the language changes the key
            "generator_code": hashlib.sha256(generator_source).hexdigest(),
        }

        def load_synthetic() -> Pairs:
            return synthetic.generate(cfg.generator)

        return fingerprint, load_synthetic

    if cfg.recipe == "custom":
        # Every file must exist before anything else is done (the path is the message).
        files = {
            split: {lang: resolve_file(prefix, lang) for lang in (cfg.src, cfg.tgt)}
            for split, prefix in cfg.prefixes.items()
        }
    else:
        files = recipe_raw_files(
            RECIPES[cfg.recipe], cfg.src, cfg.tgt, cache_root, cfg.mirror, log
        )
        for sides in files.values():
            for path in sides.values():
                if not path.is_file():
                    raise CorpusError(f"corpus file not found: {path}")
    memo = cache_root / "raw-hashes.json"
    fingerprint = {
        split: {lang: cached_sha256(path, memo) for lang, path in sides.items()}
        for split, sides in files.items()
    }

    def load_files() -> Pairs:
        pairs: Pairs = {}
        for split, sides in files.items():
            src_path, tgt_path = sides[cfg.src], sides[cfg.tgt]
            pairs[split] = read_parallel(src_path, tgt_path)
            if split == "train":
                check_not_identical(src_path, tgt_path, *pairs[split])
        return pairs

    return fingerprint, load_files


# -- the build ------------------------------------------------------------------------------
def _filter_train(cfg: CorpusConfig, tok: Pairs, raw: Pairs, log) -> dict:
    """Keep the training pairs data.filter keeps, in both the tokenized and the raw text (in place);
    the filter's counts."""
    kept, stats = filtering.filter_pairs(*tok["train"], cfg.filter)
    log(f"corpus {cfg.name}: {filtering.describe(stats)}")
    if not kept:
        raise CorpusError(
            f"all {stats['input']} training pairs were removed by data.filter "
            f"({filtering.describe(stats)}); loosen data.filter"
        )
    for pairs in (tok, raw):
        pairs["train"] = tuple([side[i] for i in kept] for side in pairs["train"])
    return stats


def _segment(cfg: CorpusConfig, tok: Pairs, splits: list, out: Path, text_dir: Path) -> dict:
    """Learn the subwords on the training text, write every split segmented; {split: pairs}."""
    models = subwords.learn(
        cfg.subwords, {cfg.src: tok["train"][0], cfg.tgt: tok["train"][1]}, out / "subwords",
        workers=cfg.workers,
    )
    sizes = {}
    for split in splits:
        for lang, lines in zip((cfg.src, cfg.tgt), tok[split]):
            segmented = subwords.apply(cfg.subwords, models.get(lang), lines, cfg.workers)
            write_lines(text_dir / f"{split}.{lang}", segmented)
        sizes[split] = len(tok[split][0])
    return sizes


def _manifest(cfg: CorpusConfig, key: str, tests: list, sizes: dict, stats: dict, split_stats) -> dict:
    """What the built corpus's manifest says: where training and scoring find each split, and how it was made."""
    src, tgt = cfg.src, cfg.tgt
    return {
        "name": cfg.name,
        "cache_key": key,
        "bin_dir": "bin",
        "src": src,
        "tgt": tgt,
        "remove_bpe": subwords.POST_PROCESS[cfg.subwords.kind],
        "subsets": {"train": "train", "valid": "valid", **binarize.subset_names(tests)},
        "test_refs": {split: f"raw/{split}.{tgt}" for split in tests},
        "test_sources": {split: f"raw/{split}.{src}" for split in tests},
        "test_sizes": {split: sizes[split] for split in tests},
        "lowercased": cfg.text.lowercase,
        "filter_stats": stats,
        "text_settings": cfg.text.as_dict(),
        "subword_kind": cfg.subwords.kind,
        "sizes": sizes,
        "preprocessing": cfg.preprocessing(),
        "recipe": cfg.recipe,
        **({"length_split": split_stats} if split_stats else {}),
    }


def _build(cfg: CorpusConfig, key: str, raw: Pairs, out: Path, log) -> None:
    src, tgt = cfg.src, cfg.tgt

    # 1. normalise + tokenize (+ lowercase if the recipe says so)
    tok = {
        split: tuple(tokenize_lines(lines, lang, cfg.text, cfg.workers)
                     for lang, lines in zip((src, tgt), raw[split]))
        for split in raw
    }

    # 2. filter training pairs only, both sides together
    stats = _filter_train(cfg, tok, raw, log)

    # 3. the length split: train and valid up to L source tokens, the longer pairs held out as test_long
    split_stats = None
    if cfg.length_split:
        raw, tok, split_stats = split_by_length(cfg.length_split, raw, tok, cfg.name)
        log(f"corpus {cfg.name}: length split at {split_stats['max_tokens']} {SIDES[split_stats['by']]}: "
            f"test_long {split_stats['test_long']} of {split_stats['long_pairs']} longer pairs "
            f"({split_stats['test_long_min_source_tokens']}-{split_stats['test_long_max_source_tokens']} tokens)")
    splits = [split for split in SPLIT_ORDER if split in raw]
    tests = [split for split in TEST_SPLITS if split in raw]

    # raw evaluation text, exactly as given: the references BLEU is computed against.
    raw_dir = out / "raw"
    for split in splits:
        if split == "train" and cfg.recipe != "synthetic":
            continue  # big, and already on disk as the user's / recipe's files
        for lang, lines in zip((src, tgt), raw[split]):
            write_lines(raw_dir / f"{split}.{lang}", lines)

    # 4. subwords, learnt on the filtered training text
    text_dir = out / "text"
    sizes = _segment(cfg, tok, splits, out, text_dir)

    # 5. binarize
    args = binarize.preprocess_command(
        src, tgt, text_dir, out / "bin", tests, cfg.joined_dictionary, cfg.workers
    )
    log(f"corpus {cfg.name}: fairseq-preprocess ({', '.join(f'{s} {sizes[s]}' for s in splits)})")
    binarize.run_preprocess(args, out / "preprocess.log")
    for lang in (src, tgt):  # the binarized copy is what training reads
        (text_dir / f"train.{lang}").unlink()

    write_manifest(out, _manifest(cfg, key, tests, sizes, stats, split_stats))
