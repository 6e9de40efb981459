"""Hydra finds launchers only under the ``hydra_plugins`` namespace; the launcher lives in
``posenc.harness.launch.slurm_launcher``."""
