"""A fairseq data-bin as ``fairseq-preprocess`` writes it, read from its file names alone (no fairseq):
the dictionaries ``dict.<lang>.txt``, and each split of each pair as ``<split>.<a>-<b>.<lang>.bin``
and ``.idx``. ``data=binarized`` sweeps such a directory as it is (``posenc.corpora.binarized``)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import CorpusError

_DATA_FILE = re.compile(r"^(?P<split>[^.]+)\.(?P<a>[^.-]+)-(?P<b>[^.-]+)\.(?P<lang>[^.]+)\.(?:bin|idx)$")
_DICT_FILE = re.compile(r"^dict\.(?P<lang>[^.]+)\.txt$")
NEEDED = ("train", "valid", "test")  # what every cell trains, validates and scores on
SPECIALS = 4  # <s>, <pad>, </s>, <unk>: fairseq's Dictionary adds them; dict.<lang>.txt does not list them


@dataclass(frozen=True)
class DataBin:
    """The pair a cell trains on, in ``dir``: ``src`` -> ``tgt``, stored as ``pair`` (``a-b``, the order
    fairseq-preprocess was given; fairseq reads either direction), and each split's fairseq subset."""
    dir: Path
    src: str
    tgt: str
    pair: str
    subsets: dict          # our split -> fairseq subset (test_long -> test1, ...)
    joined_dictionary: bool

    def files(self) -> list:
        """Every file training and scoring read: both dictionaries and each subset's data and index."""
        out = [self.dir / f"dict.{lang}.txt" for lang in (self.src, self.tgt)]
        for subset in dict.fromkeys(self.subsets.values()):
            out += [self.dir / f"{subset}.{self.pair}.{lang}.{ext}" for lang in (self.src, self.tgt)
                    for ext in ("bin", "idx")]
        return out

    def sentences(self, split: str):
        """The sentences of a split (its index's header), or None for an index of another format."""
        return sentences(Path(f"{self.prefix(split, self.src)}.idx"))

    def vocabulary(self) -> int:
        """The larger side's dictionary size as fairseq loads it: its file's entries (padding included,
        as fairseq-preprocess saves them) and the four specials every Dictionary adds."""
        return max(_lines(self.dir / f"dict.{lang}.txt") for lang in (self.src, self.tgt)) + SPECIALS

    def prefix(self, split: str, lang: str) -> Path:
        """fairseq's dataset prefix of one side of a split (``.../test.de-en.en``)."""
        return self.dir / f"{self.subsets[split]}.{self.pair}.{lang}"


def read_databin(dir_value, src=None, tgt=None, test_long=None) -> DataBin:
    """The data-bin at ``data.dir`` with the pair ``data.src``/``data.tgt`` choose (either may be None
    where DIR says it), checked to hold train, valid and test (and ``test_long``'s subset, when named);
    CorpusError, one line naming what is missing, otherwise."""
    where = f"data.dir={dir_value}"
    root = Path(str(dir_value)).expanduser().resolve()
    if not root.is_dir():
        raise CorpusError(f"{where}: no such directory; give a data-bin written by fairseq-preprocess")
    names = [p.name for p in root.iterdir() if p.is_file()]
    dicts = {m["lang"] for m in map(_DICT_FILE.match, names) if m}
    found = {}  # pair (a, b) -> {subset: {lang: extensions}}
    for m in filter(None, map(_DATA_FILE.match, names)):
        found.setdefault((m["a"], m["b"]), {}).setdefault(m["split"], {}).setdefault(m["lang"], set()).add(
            m.group(0).rsplit(".", 1)[1])
    if not dicts or not found:
        raise CorpusError(f"{where} holds no fairseq data: no dict.<lang>.txt and <split>.<src>-<tgt>.<lang>.bin/.idx "
                          "files (what fairseq-preprocess writes)")
    (a, b), src, tgt = _pair(where, sorted(found), src, tgt)
    missing = sorted({src, tgt} - dicts)
    if missing:
        raise CorpusError(f"{where} has no dictionary dict.{missing[0]}.txt for {src}-{tgt}")
    subsets = {split: split for split in NEEDED}
    if test_long:
        subsets["test_long"] = str(test_long)
    _check_splits(where, found[(a, b)], subsets, f"{a}-{b}", (src, tgt))
    joined = (root / f"dict.{src}.txt").read_bytes() == (root / f"dict.{tgt}.txt").read_bytes()
    return DataBin(root, src, tgt, f"{a}-{b}", subsets, joined)


def _pair(where: str, pairs: list, src, tgt):
    """``((a, b), src, tgt)``: the stored pair the languages choose, and the direction to train."""
    given = [lang for lang in (src, tgt) if lang]
    fits = [p for p in pairs if set(given) <= set(p) and (len(given) < 2 or set(p) == set(given))]
    named = ", ".join(f"{x}-{y}" for x, y in pairs)
    if not fits:
        raise CorpusError(f"{where} holds no {'-'.join(given)} pair (it holds {named})")
    if len(fits) > 1:
        raise CorpusError(f"{where} holds several pairs ({named}): choose one with data.src=... data.tgt=...")
    (a, b), = fits
    if src and not tgt:
        tgt = b if src == a else a
    elif tgt and not src:
        src = b if tgt == a else a
    elif not src:
        src, tgt = a, b
    return (a, b), src, tgt


def _check_splits(where: str, stored: dict, subsets: dict, pair: str, langs) -> None:
    for split, subset in subsets.items():
        for lang in langs:
            if stored.get(subset, {}).get(lang) != {"bin", "idx"}:
                key = " (data.test_long)" if split == "test_long" else ""
                raise CorpusError(f"{where} lacks the {subset} split{key} of {pair}: no {subset}.{pair}.{lang}.bin "
                                  f"and .idx (it holds {', '.join(sorted(stored)) or 'no split'})")


# The two index formats fairseq-preprocess writes: its default (mmap) and the older lazy/cached one.
_MMAP_MAGIC = b"MMIDIDX\x00\x00"
_TNT_MAGIC = b"TNTIDX\x00\x00"


def sentences(idx: Path):
    """The number of sentences of a subset, read from its ``.idx`` header (no fairseq); None for an
    index of another format."""
    with open(idx, "rb") as handle:
        head = handle.read(48)
    if head.startswith(_MMAP_MAGIC):  # magic, version <Q, dtype code <B, then the count <Q
        return struct.unpack_from("<Q", head, len(_MMAP_MAGIC) + 9)[0]
    if head.startswith(_TNT_MAGIC):   # magic, version <Q, dtype code <Q, element size <Q, then the count <Q
        return struct.unpack_from("<Q", head, len(_TNT_MAGIC) + 24)[0]
    return None


def _lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())
