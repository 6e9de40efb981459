"""``hydra/sweeper=posenc_tune``'s class (``_target_`` in conf/hydra/sweeper/posenc_tune.yaml): Hydra
instantiates a sweeper only from a module under ``hydra_plugins``; everything it does is in
``posenc.harness.sweep.tune``."""

from posenc.harness.sweep.tune import TuneSweeper as PosencTuneSweeper


class TuneSweeper(PosencTuneSweeper):
    pass
