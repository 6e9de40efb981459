"""At a sweep's start: a ``data=binarized`` DIR that holds no fairseq data, or lacks a split or pair the
cells need, is refused in one line before any cell runs (one cell alone refuses it as it resolves).
Where the sweep varies the data itself (``data.dir=A,B``), each cell checks its own."""

import sys

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from posenc.corpora import CorpusError, parse_corpus_config


def swept_keys(config) -> set:
    """The keys the sweep varies: the command line's sweeps and the preset's ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = [str(line) for line in config.hydra.overrides.task]
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    swept = {o.key_or_group for o in OverridesParser.create().parse_overrides(task) if o.is_sweep_override()}
    return swept | set(params)


def data_swept(config) -> bool:
    return any(key == "data" or key.startswith("data.") for key in swept_keys(config))


class DataBinCheck(Callback):
    """Hydra's callback in ``posenc-run``'s own process, before the sweeper launches anything."""

    def on_multirun_start(self, config, **kwargs) -> None:
        if OmegaConf.select(config, "data.recipe", default=None) != "binarized" or data_swept(config):
            return
        try:
            parse_corpus_config(config.data)
        except CorpusError as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
