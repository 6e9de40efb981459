"""``data=binarized``: the user's fairseq data-bin, swept as it is. Nothing is tokenized, segmented or
binarized again: fairseq trains on DIR itself. Its cache entry (content-addressed like every corpus's:
the key hashes DIR's files) holds what scoring needs: each test split's source and reference as text,
either the user's raw references (``data.references.<split>``: BLEU on detokenized output, as for
every recipe) or DIR's own targets with the subword marks removed, when BLEU is on tokenized text and
the record, the table and the signature say so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from . import subwords
from .config import CorpusConfig
from .errors import CorpusError
from .moses import TextSettings
from .prepared import write_manifest
from .textio import cached_sha256

TESTS = ("test", "test_long")
TOKENIZED, DETOKENIZED = "tokenized", "detokenized"  # what BLEU is computed on (PreparedCorpus.bleu_on)


def fingerprint(cfg: CorpusConfig, cache_root: Path) -> dict:
    """What identifies the corpus: the content of every file of DIR that training and scoring read,
    and of the raw references (hashed once per file, remembered by size and time)."""
    memo = cache_root / "raw-hashes.json"
    return {"databin": {path.name: cached_sha256(path, memo) for path in cfg.databin.files()},
            "references": {split: cached_sha256(Path(path), memo) for split, path in cfg.references.items()}}


def decode(cfg: CorpusConfig, sides: list, work: Path) -> list:
    """Sides ``(split, lang, out file, escape_unk)`` of DIR as text, in one child
    (``posenc.corpora.fairseq_text``): the sentences of each."""
    databin = cfg.databin
    jobs = [{"prefix": str(databin.prefix(split, lang)), "dictionary": str(databin.dir / f"dict.{lang}.txt"),
             "post_process": subwords.POST_PROCESS[cfg.subwords.kind], "out": str(out), "escape_unk": escape}
            for split, lang, out, escape in sides]
    (work / "decode.json").write_text(json.dumps(jobs), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "posenc.corpora.fairseq_text", str(work / "decode.json")],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CorpusError(f"data.dir={databin.dir}: fairseq cannot read its test splits: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build(cfg: CorpusConfig, key: str, out: Path, log) -> None:
    """The cache entry of ``cfg``'s data-bin: the test splits' text, and the manifest (written last).
    Each reference is the user's raw file or DIR's own target side."""
    databin, raw = cfg.databin, out / "raw"
    raw.mkdir(parents=True)
    tests = [split for split in TESTS if split in databin.subsets]
    sizes = {split: databin.sentences(split) for split in databin.subsets}
    sides = [(split, cfg.src, raw / f"{split}.{cfg.src}", False) for split in tests]
    # an unknown word never matches (<<unk>>), as in fairseq-generate's own references
    sides += [(split, cfg.tgt, raw / f"{split}.{cfg.tgt}", True) for split in tests if split not in cfg.references]
    sizes.update(zip(tests, decode(cfg, sides, out)))
    (out / "decode.json").unlink()
    for split, path in cfg.references.items():  # one line a sentence: checked as the config was read
        shutil.copyfile(path, raw / f"{split}.{cfg.tgt}")
    bleu_on = DETOKENIZED if cfg.references else TOKENIZED
    log(f"corpus {cfg.name}: data-bin {databin.dir} ({databin.pair}, "
        f"{'joined' if databin.joined_dictionary else 'separate'} dictionaries; "
        f"{', '.join(f'{s} {n}' for s, n in sizes.items())}); BLEU on {bleu_on} text")
    write_manifest(out, manifest(cfg, key, tests, sizes, bleu_on))


def manifest(cfg: CorpusConfig, key: str, tests: list, sizes: dict, bleu_on: str) -> dict:
    """The entry's manifest: DIR itself as the binarized data; the text settings that turn the output into
    what the references are (raw references: detokenized as configured; DIR's targets: left as they are)."""
    databin = cfg.databin
    text = cfg.text if bleu_on == DETOKENIZED else TextSettings("none", False, cfg.text.lowercase, False)
    return {
        "name": cfg.name, "cache_key": key, "bin_dir": str(databin.dir), "src": cfg.src, "tgt": cfg.tgt,
        "remove_bpe": subwords.POST_PROCESS[cfg.subwords.kind], "subsets": dict(databin.subsets),
        "test_refs": {split: f"raw/{split}.{cfg.tgt}" for split in tests},
        "test_sources": {split: f"raw/{split}.{cfg.src}" for split in tests},
        "test_sizes": {split: sizes[split] for split in tests}, "lowercased": cfg.text.lowercase,
        "filter_stats": {}, "text_settings": text.as_dict(), "subword_kind": cfg.subwords.kind, "sizes": sizes,
        "preprocessing": cfg.preprocessing(), "recipe": cfg.recipe, "bleu_on": bleu_on,
        "databin": {"dir": str(databin.dir), "pair": databin.pair, "joined_dictionary": databin.joined_dictionary},
    }
