"""Learned absolute position embeddings: an ``L x D`` table looked up by integer position.

The two fairseq families lay out and initialise their tables differently, and strict loading of
stock checkpoints depends on matching both, hence one class and two factories.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from posenc.encodings.positions import make_positions, step_positions


class LearnedPositionalEmbedding(nn.Embedding):
    """Table of ``num_embeddings`` rows; row ``padding_idx`` stays zero (pads get no position).

    forward(tokens ``(B, T)``) -> ``(B, T, D)``; with ``incremental_state`` not None (one decoding
    step, ``tokens`` the whole prefix) -> ``(1, 1, D)`` for the newest position.
    ``max_positions``: the longest sentence the table covers.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.max_positions = num_embeddings - padding_idx - 1

    def forward(self, tokens, incremental_state=None, positions=None):
        if positions is None:
            if incremental_state is not None:
                positions = step_positions(tokens, self.padding_idx)
            else:
                positions = make_positions(tokens, self.padding_idx)
        return F.embedding(positions, self.weight, self.padding_idx)


def fconv_learned_positions(max_positions_arg: int, embedding_dim: int, padding_idx: int) -> LearnedPositionalEmbedding:
    """ConvS2S's table: ``max_positions_arg`` rows (so ``max_positions_arg - padding_idx - 1``
    usable positions), N(0, 0.1) like fconv's token embeddings, zero pad row."""
    table = LearnedPositionalEmbedding(max_positions_arg, embedding_dim, padding_idx)
    nn.init.normal_(table.weight, 0, 0.1)
    nn.init.constant_(table.weight[padding_idx], 0)
    return table


def transformer_learned_positions(max_positions_arg: int, embedding_dim: int,
                                  padding_idx: int) -> LearnedPositionalEmbedding:
    """The Transformer's table: ``max_positions_arg + padding_idx + 1`` rows (so exactly
    ``max_positions_arg`` usable positions), N(0, D^-1/2), zero pad row."""
    table = LearnedPositionalEmbedding(max_positions_arg + padding_idx + 1, embedding_dim, padding_idx)
    nn.init.normal_(table.weight, mean=0, std=embedding_dim**-0.5)
    nn.init.constant_(table.weight[padding_idx], 0)
    return table


def copy_learned_init(new_table, stock_table):
    """Give ``new_table`` the stock table's initial rows when both are learned tables of one
    shape, so default flags reproduce the stock model's initialisation exactly."""
    weight = getattr(stock_table, "weight", None)
    if weight is not None and weight.shape == new_table.weight.shape:
        with torch.no_grad():
            new_table.weight.copy_(weight)
    return new_table


def build_side(side):
    """The ``learned`` kind of a side (``posenc.kinds.Side``): the family's table, starting from
    the stock model's rows."""
    make = fconv_learned_positions if side.family == "fconv" else transformer_learned_positions
    return copy_learned_init(make(side.max_positions_arg, side.embed_dim, side.padding_idx), side.stock_table)


__all__ = [
    "LearnedPositionalEmbedding",
    "build_side",
    "copy_learned_init",
    "fconv_learned_positions",
    "transformer_learned_positions",
]
