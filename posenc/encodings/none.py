"""The absent position term."""

import torch
import torch.nn as nn


class NoPositionalEmbedding(nn.Module):
    """Adds nothing and holds no parameters.

    It exists for code that adds a position term unconditionally (fconv's encoder does) and asks
    the table for ``max_positions``: the side then carries no position signal anywhere while the
    model still reports the same length limit as its learned counterpart.
    forward(tokens ``(B, T)``) -> a zero scalar that broadcasts against ``(B, T, D)``.
    """

    def __init__(self, max_positions: int):
        super().__init__()
        self.max_positions = max_positions

    def forward(self, tokens, incremental_state=None, positions=None):
        return torch.zeros((), device=tokens.device)


def build_side(side):
    """The ``none`` kind of a side (``posenc.kinds.Side``): fconv adds its position term
    unconditionally, so it gets a zero term that reports the stock limit; the Transformer no module."""
    return NoPositionalEmbedding(max_positions=side.max_positions) if side.family == "fconv" else None
