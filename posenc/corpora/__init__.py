"""Corpora: the embedded synthetic task and the real-data pipeline (see docs/corpora.md).

    from posenc.corpora import prepare_corpus, PreparedCorpus, CorpusError
    prepared = prepare_corpus(data_cfg, cache_root, log=print)
"""

from .errors import CorpusError
from .pipeline import prepare_corpus
from .prepared import PreparedCorpus

__all__ = ["CorpusError", "PreparedCorpus", "prepare_corpus"]
