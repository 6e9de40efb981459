"""A position kind of your own, for ``posenc-run kinds_module=examples/my_kinds.py pe=halftable``.

``halftable``: a learned position table whose rows are added to the token embeddings at half
strength. The file imports ``posenc.kinds`` and torch only, never fairseq or the plugin: posenc-run
runs it to check ``pe=`` and fairseq's children run it again (``POSENC_KINDS_MODULE``) before they
build their models. docs/configs.md ("Your own kind") and docs/plugin.md ("Adding a position kind")
say what a registration holds; its ``checkpoint`` tells posenc-pe to read the table.
"""

import torch
import torch.nn as nn

from posenc.kinds import EMBEDDINGS, POSITION_KEY, TABLE, InCheckpoint, Side, register_kind


class HalfTable(nn.Embedding):
    """forward(tokens ``(B, T)``) -> ``(B, T, D)``; in a decoding step (``incremental_state`` not
    None, ``tokens`` the whole prefix) the newest position's ``(B, 1, D)``. Positions count from
    ``padding_idx + 1``, as fairseq's learned tables do; pads get the zero row."""

    def __init__(self, side: Side):
        super().__init__(side.max_positions + side.padding_idx + 1, side.embed_dim, side.padding_idx)
        nn.init.normal_(self.weight, std=side.embed_dim ** -0.5)
        with torch.no_grad():
            self.weight[side.padding_idx].zero_()
        self.max_positions = side.max_positions  # what the model reports: every cell keeps the same sentences

    def forward(self, tokens, incremental_state=None, positions=None):
        real = tokens.ne(self.padding_idx).long()
        p = torch.cumsum(real, dim=1) * real + self.padding_idx
        if incremental_state is not None:
            p = p[:, -1:]
        return 0.5 * super().forward(p)


@register_kind("halftable", families=("fconv", "transformer"), acts=EMBEDDINGS,
               checkpoint=InCheckpoint(markers=(POSITION_KEY,), reads=TABLE))
def build(side: Side) -> HalfTable:
    return HalfTable(side)
