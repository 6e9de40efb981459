"""Corpora: the embedded synthetic task and the real-data pipeline (see docs/corpora.md).

    from posenc.corpora import prepare_corpus, PreparedCorpus, CorpusError
    prepared = prepare_corpus(data_cfg, cache_root, log=print)

``data_cfg``: the ``data`` node, or the ``CorpusConfig`` that ``parse_corpus_config`` made of it (a
cell parses it before any work, so that a bad key is refused with its other values).
"""

from .config import CorpusConfig
from .config import parse as parse_corpus_config
from .errors import CorpusError
from .pipeline import prepare_corpus
from .prepared import PreparedCorpus

__all__ = ["CorpusConfig", "CorpusError", "PreparedCorpus", "parse_corpus_config", "prepare_corpus"]
