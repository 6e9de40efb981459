"""At a sweep's start: a ``data=binarized`` DIR that holds no fairseq data, or lacks a split or pair the
cells need, is refused in one line before any cell runs (one cell alone refuses it as it resolves).
Where the sweep varies data keys (``data.src=de,en``), every combination of their values is checked;
where it varies the data preset itself (``data=binarized,wmt14_en_de``), each cell checks its own.
(``data.dir`` never names a cell, so a sweep of it is refused first: ``posenc.harness.sweep.swept``.)"""

import copy
import sys

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf, open_dict

from posenc.cells.plan import sweep_jobs
from posenc.corpora import CorpusError, parse_corpus_config
from posenc.harness.sweep.swept import swept


def data_configs(config):
    """The data configs the sweep's cells have: one per combination of the swept ``data.<key>`` values,
    as Hydra's basic sweeper combines them (``posenc.cells.plan.sweep_jobs``; the config as composed
    where none is swept), or None where the sweep varies the ``data`` preset. ValueError for a data key
    swept over a range."""
    overrides = {key: o for key, o in swept(config).items() if key == "data" or key.startswith("data.")}
    if "data" in overrides:
        return None
    out = []
    for job in sweep_jobs(list(overrides.values())):
        cell = copy.deepcopy(config)
        OmegaConf.set_readonly(cell, False)
        with open_dict(cell):
            for line in job:
                key, value = line.split("=", 1)
                OmegaConf.update(cell, key.lstrip("+~"), value, merge=True)
        out.append(cell.data)
    return out


class DataBinCheck(Callback):
    """Hydra's callback in ``posenc-run``'s own process, before the sweeper launches anything."""

    def on_multirun_start(self, config, **kwargs) -> None:
        if OmegaConf.select(config, "data.recipe", default=None) != "binarized":
            return
        try:
            for data in data_configs(config) or []:
                parse_corpus_config(data)
        except (CorpusError, ValueError) as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
