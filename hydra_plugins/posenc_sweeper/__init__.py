"""posenc's adaptive sweeper (``hydra/sweeper=posenc_seeds``); everything it does is in
``posenc.harness.sweep.seeds``."""
