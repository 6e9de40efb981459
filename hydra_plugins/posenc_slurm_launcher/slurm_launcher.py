"""``hydra/launcher=slurm``'s class (``_target_`` in conf/hydra/launcher/slurm.yaml): Hydra instantiates
a launcher only from a module under ``hydra_plugins``; everything it does is in
``posenc.harness.launch.slurm_launcher``."""

from posenc.harness.launch.slurm_launcher import PosencSlurmLauncher


class SlurmLauncher(PosencSlurmLauncher):
    pass
