"""Swapping position modules into a freshly built stock model."""

import torch

# Distinct seeds for tables drawn fresh on each side, so an encoder and a decoder table of one
# shape never start out identical.
SIDE_SALT = {"encoder": 1, "decoder": 2}


def build_without_touching_rng(factory, side: str):
    """Run ``factory()`` with the global RNG forked and reseeded from its initial seed.

    Position modules are built after the stock model and must not advance the global RNG: then,
    for a given seed, every placement and kind starts from the same non-position weights and the
    same RNG state (which dropout masks follow from it while training: docs/plugin.md).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torch.initial_seed() + SIDE_SALT[side])
        return factory()

