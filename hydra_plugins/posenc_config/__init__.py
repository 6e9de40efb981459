"""posenc's own config defaults in Hydra's ConfigStore: the root config's settings
(``posenc_schema``, ``posenc.harness.config.schema.RootSchema``) and the keys every data preset shares
(``posenc_data_schema``, ``posenc.corpora.config.DataSchema``). Both are stored outside every config
group, so ``posenc-run --help`` never offers them as choices; a data preset lists the latter by its
absolute name, ``/posenc_data_schema``. Hydra imports this package when
it scans its plugins, before it composes any config (``posenc-run``, ``python -m``, an installed
package, a launcher's worker, Hydra's compose API), so conf/config.yaml and the data presets find them.

Each is stored as a plain config, the dataclass's values without its type: a typed node refuses
every key its class lacks (``Key 'generator' not in 'DataSchema'``), and the root and data nodes
take keys the schemas cannot list (a group's, a recipe's own, a user preset's), while every field
is ``Any`` anyway, so the type would check nothing more.
"""

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from posenc.corpora.config import DataSchema
from posenc.harness.config.schema import RootSchema


def untyped(schema) -> dict:
    """The dataclass's fields and defaults as plain data (``???`` where a field has none)."""
    return OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)


ConfigStore.instance().store(name="posenc_schema", node=untyped(RootSchema), provider="posenc")
ConfigStore.instance().store(name="posenc_data_schema", node=untyped(DataSchema), provider="posenc")
