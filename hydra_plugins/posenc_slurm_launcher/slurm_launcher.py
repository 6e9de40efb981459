"""``hydra/launcher=slurm``'s class (``_target_`` in conf/hydra/launcher/slurm.yaml): Hydra instantiates
a launcher only from a module under ``hydra_plugins``; everything it does is in
``posenc.harness.launch.slurm_launcher``. Its config node adds ``cells_per_task`` to submitit's
(Hydra loads every module here, so the node is registered before the preset is composed)."""

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf

from posenc.harness.launch.slurm_launcher import PosencSlurmLauncher


class SlurmLauncher(PosencSlurmLauncher):
    pass


@dataclass
class PosencSlurmQueueConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.posenc_slurm_launcher.slurm_launcher.SlurmLauncher"
    # Cells of the sweep in one array task, on its GPU(s) (posenc.harness.launch.slurm_groups). Any:
    # a bad value (0, -1, 1.5) is refused by the launcher in one line, not by OmegaConf's type check.
    cells_per_task: Any = 1


# Outside the hydra/launcher group, so that --hydra-help offers no base node as a launcher; the
# slurm preset lists it as /posenc_slurm_base.
ConfigStore.instance().store(name="posenc_slurm_base", node=PosencSlurmQueueConf(),
                             provider="posenc")
