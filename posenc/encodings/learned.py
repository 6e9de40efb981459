"""Learned absolute position embeddings: an ``L x D`` table looked up by integer position.

The two fairseq families lay out and initialise their tables differently, and strict loading of
stock checkpoints depends on matching both, hence one class and two factories.
"""

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


__all__ = [
    "LearnedPositionalEmbedding",
    "fconv_learned_positions",
    "transformer_learned_positions",
]
