"""A position kind registered from outside the package: a fairseq ``--user-dir`` of its own.

fairseq imports one ``--user-dir``, so this one imports the posenc plugin (its models) and
registers its kind beside the built-in ones; then ``--encoder-pos ramp`` / ``--decoder-pos ramp``
are valid wherever the flags are (``fairseq-train``, ``fairseq-generate``, ``fairseq-validate`` with
``--user-dir tests/toy_kind``). docs/plugin.md ("Adding a position kind") walks through it.

``ramp``: the token at position p (0: the first real token) gets ``p * slope`` added, ``slope`` a
learned vector of the embedding's width; pads get nothing.
"""

import torch
import torch.nn as nn

import posenc.fairseq_plugin  # noqa: F401  (registers the posenc_* models and architectures)
from posenc.kinds import EMBEDDINGS, Side, register_kind

INITIAL_SLOPE = 0.01


class RampEmbedding(nn.Module):
    """forward(tokens ``(B, T)``) -> ``(B, T, D)``; in a decoding step (``incremental_state`` not
    None, ``tokens`` the whole prefix) the newest position's ``(B, 1, D)``."""

    def __init__(self, embed_dim: int, padding_idx: int, max_positions: int):
        super().__init__()
        self.padding_idx = padding_idx
        self.max_positions = max_positions  # what the model reports: the stock learned limit
        self.slope = nn.Parameter(torch.full((embed_dim,), INITIAL_SLOPE))

    def forward(self, tokens, incremental_state=None, positions=None):
        real = tokens.ne(self.padding_idx)
        p = (real.cumsum(dim=1) - 1).clamp(min=0) * real  # 0, 1, ... from the first real token
        if incremental_state is not None:
            p = p[:, -1:]
        return p[..., None].to(self.slope.dtype) * self.slope


@register_kind("ramp", families=("fconv", "transformer"), acts=EMBEDDINGS)
def build_ramp(side: Side) -> RampEmbedding:
    return RampEmbedding(side.embed_dim, side.padding_idx, side.max_positions)
