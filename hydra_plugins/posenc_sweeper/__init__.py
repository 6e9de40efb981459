"""posenc's adaptive sweepers (``hydra/sweeper=posenc_seeds``, ``posenc_tune``). Hydra imports this
package when it scans its plugins, so their structured configs (``posenc.harness.sweep.config``)
are in its ConfigStore before any preset selects them; everything else is in
``posenc.harness.sweep``."""

from hydra.core.config_store import ConfigStore

from posenc.harness.sweep.config import SeedsSweeperConf, TuneSweeperConf

ConfigStore.instance().store(name="posenc_seeds_schema", node=SeedsSweeperConf,
                             provider="posenc")
ConfigStore.instance().store(name="posenc_tune_schema", node=TuneSweeperConf,
                             provider="posenc")
