"""BLEU by source length: each test sentence falls in exactly one bucket of source words."""

from dataclasses import dataclass

import numpy as np

# Upper edges in source words (whitespace tokens of the raw source); the last bucket is open.
# News-like test sets run from a few words to 100+; corpora of shorter sentences get their own.
REAL_EDGES = (10, 20, 30, 40)
CORPUS_EDGES = {
    "synthetic": (8, 12),             # 4-16 words a sentence
    "multi30k_de_en": (8, 12, 16),    # image captions: 4-30 words, median 10 (test_2016_flickr)
}


class BucketError(ValueError):
    """A ``--buckets`` value that is not a list of increasing positive integers."""


def parse_edges(text: str):
    """``"8,12"`` -> ``(8, 12)``: buckets 1-8, 9-12, 13+."""
    try:
        edges = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise BucketError(f"--buckets {text!r}: not a comma-separated list of integers (e.g. 10,20,30)") from None
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise BucketError(f"--buckets {text!r}: edges must be positive and strictly increasing (e.g. 10,20,30)")
    return edges


def default_edges(corpus_names) -> tuple:
    """A corpus's own edges when every corpus of the report has the same ones, else those for
    news-like text (one set of columns for every row)."""
    edges = {CORPUS_EDGES.get(name, REAL_EDGES) for name in corpus_names}
    return edges.pop() if len(edges) == 1 else REAL_EDGES


def labels(edges) -> list:
    """``(8, 12)`` -> ``["1-8", "9-12", "13+"]``."""
    lows = (1,) + tuple(e + 1 for e in edges)
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges)] + [f"{lows[-1]}+"]


def source_lengths(sources) -> np.ndarray:
    return np.array([len(line.split()) for line in sources], dtype=np.int64)


def assign(lengths, edges) -> np.ndarray:
    """The bucket index of each sentence: the first edge its length does not exceed, else the
    open last bucket."""
    return np.searchsorted(np.asarray(edges), np.asarray(lengths), side="left")


@dataclass(frozen=True)
class Buckets:
    edges: tuple
    index: np.ndarray      # bucket of each test sentence

    @property
    def labels(self):
        return labels(self.edges)

    @property
    def sizes(self):
        return np.bincount(self.index, minlength=len(self.edges) + 1).tolist()

    def summed(self, stats: np.ndarray) -> np.ndarray:
        """Sufficient statistics summed per bucket: one row per bucket."""
        out = np.zeros((len(self.edges) + 1, stats.shape[1]), dtype=stats.dtype)
        np.add.at(out, self.index, stats)
        return out


def buckets_for(sources, edges) -> Buckets:
    return Buckets(tuple(edges), assign(source_lengths(sources), edges))
