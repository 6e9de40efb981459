"""``hydra/sweeper=posenc_seeds``'s class (``_target_`` in conf/hydra/sweeper/posenc_seeds.yaml): Hydra
instantiates a sweeper only from a module under ``hydra_plugins``; everything it does is in
``posenc.harness.sweep.seeds``."""

from posenc.harness.sweep.seeds import SeedsSweeper as PosencSeedsSweeper


class SeedsSweeper(PosencSeedsSweeper):
    pass
