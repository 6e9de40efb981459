"""What a prepared corpus hands to the harness: where the binarized data is, and how to score."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import subwords as subword_mod
from .moses import TextSettings, detokenize_lines, tokenize_lines

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class PreparedCorpus:
    name: str
    cache_key: str
    bin_dir: Path  # fairseq-preprocess output: dict.<lang>.txt and the subsets below
    src: str
    tgt: str
    remove_bpe: str  # value for fairseq-generate --post-process ("" = none)
    subsets: dict[str, str]  # our split name -> fairseq subset name (test_long -> test1)
    test_refs: dict[str, Path]  # raw target side of each test split, exactly as given
    test_sources: dict[str, Path]  # raw source side of each test split
    test_sizes: dict[str, int]
    lowercased: bool
    filter_stats: dict
    text_settings: TextSettings = field(default_factory=TextSettings)
    subword_kind: str = "bpe"
    sizes: dict[str, int] = field(default_factory=dict)  # sentence pairs per split, as binarized
    length_split: dict | None = None  # data.length_split's settings and counts, where the corpus has one
    entry: Path | None = None  # the cache entry (bin_dir's parent, but for a user's data-bin: data=binarized)
    bleu_on: str = "detokenized"  # what BLEU compares: detokenized output and raw references, or tokenized text
    databin: dict | None = None  # data=binarized: the user's data-bin (dir, pair, joined_dictionary)

    @property
    def test_splits(self) -> list[str]:
        return list(self.test_refs)

    def references(self, split: str = "test") -> list[str]:
        """The raw references of a test split, split on "\\n" only.

        (str.splitlines would also split on U+2028 and other separators inside a sentence.)
        """
        return _read_lines(self.test_refs[split])

    def sources(self, split: str = "test") -> list[str]:
        return _read_lines(self.test_sources[split])

    def detokenize(self, lines: list[str]) -> list[str]:
        """fairseq output with subwords already removed -> raw target-language text."""
        return detokenize_lines(lines, self.tgt, self.text_settings)

    def tokenize(self, lines: list[str], side: str = "tgt") -> list[str]:
        """Raw text -> the tokenized form the model was trained on (for tokenized BLEU)."""
        lang = {"src": self.src, "tgt": self.tgt}[side]
        return tokenize_lines(lines, lang, self.text_settings)

    def remove_subwords(self, lines: list[str]) -> list[str]:
        """The same as fairseq-generate --post-process <remove_bpe>."""
        return subword_mod.remove(self.subword_kind, lines)

    def record(self) -> dict:
        """A JSON-able summary for result files."""
        return {
            "name": self.name,
            "cache_key": self.cache_key,
            # the cache entry, so a report can find the test references and sources again
            "dir": str(self.entry or self.bin_dir.parent),
            "src": self.src,
            "tgt": self.tgt,
            "lowercased": self.lowercased,
            "tokenizer": self.text_settings.tokenizer,
            "subword": self.subword_kind,
            "filter_stats": self.filter_stats,
            "sizes": self.sizes,
            **({"length_split": self.length_split} if self.length_split else {}),
            **({"databin": self.databin, "bleu_on": self.bleu_on} if self.databin else {}),
        }


def _read_lines(path: Path) -> list[str]:
    text = Path(path).read_bytes().decode("utf-8")
    return text[:-1].split("\n") if text else []


def write_manifest(entry: Path, manifest: dict) -> None:
    # Written last into the temp build folder: its presence marks a complete entry.
    (entry / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))


def load_prepared(entry: Path) -> PreparedCorpus:
    m = json.loads((entry / MANIFEST).read_text())
    return PreparedCorpus(
        name=m["name"],
        cache_key=m["cache_key"],
        bin_dir=entry / m["bin_dir"],
        src=m["src"],
        tgt=m["tgt"],
        remove_bpe=m["remove_bpe"],
        subsets=dict(m["subsets"]),
        test_refs={k: entry / v for k, v in m["test_refs"].items()},
        test_sources={k: entry / v for k, v in m["test_sources"].items()},
        test_sizes=dict(m["test_sizes"]),
        lowercased=m["lowercased"],
        filter_stats=m["filter_stats"],
        text_settings=TextSettings(**m["text_settings"]),
        subword_kind=m["subword_kind"],
        sizes=dict(m["sizes"]),
        length_split=m.get("length_split"),
        entry=entry,
        bleu_on=m.get("bleu_on", "detokenized"),
        databin=m.get("databin"),
    )
