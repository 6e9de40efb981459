"""The test set a cell was scored on (references and sources of each test split), found again from
the corpus its record names (``Record.corpus``: the prepared corpus's name, cache key and
cache entry)."""

import os
from dataclasses import dataclass
from pathlib import Path

from posenc.cells.record import Record
from posenc.corpora.cache import entry_dir
from posenc.corpora.prepared import MANIFEST, load_prepared


@dataclass(frozen=True)
class TestSet:
    key: str                # the corpus's cache key: two cells share a test set iff their keys agree
    name: str
    references: dict        # split -> reference lines
    sources: dict           # split -> source lines


class TestSets:
    """Finds and keeps (per report, not per process) each corpus's test set."""

    def __init__(self, cache_roots=()):
        self._roots = [Path(r) for r in cache_roots]
        env = os.environ.get("POSENC_CACHE")
        if env:
            self._roots.append(Path(env))
        self._roots.append(Path.cwd() / ".posenc_cache")
        self._found = {}

    def find(self, record: Record):
        """``(TestSet, "")`` or ``(None, why not)`` for a record."""
        corpus = record.corpus
        if not isinstance(corpus, dict) or not corpus.get("cache_key") or not corpus.get("name"):
            return None, "record names no corpus"
        key = corpus["cache_key"]
        if key not in self._found:
            self._found[key] = self._load(corpus)
        return self._found[key]

    def _load(self, corpus):
        candidates = ([Path(corpus["dir"])] if corpus.get("dir") else []) + \
                     [entry_dir(root, corpus["name"], corpus["cache_key"]) for root in self._roots]
        for entry in candidates:
            if not (entry / MANIFEST).is_file():
                continue
            try:
                prepared = load_prepared(entry)
                if prepared.cache_key != corpus["cache_key"]:
                    continue
                splits = prepared.test_splits
                return TestSet(prepared.cache_key, prepared.name, {s: prepared.references(s) for s in splits},
                               {s: prepared.sources(s) for s in splits}), ""
            except (OSError, KeyError, ValueError, UnicodeDecodeError):
                continue
        return None, f"test set of corpus {corpus['name']}-{corpus['cache_key'][:8]} not found (set POSENC_CACHE)"
