"""Hydra finds launchers only under the ``hydra_plugins`` namespace; the launcher lives in
``posenc.harness.slurm_launcher``."""
