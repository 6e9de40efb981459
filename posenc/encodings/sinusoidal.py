"""Fixed sinusoidal position encodings, in both published layouts.

``paper`` (Vaswani et al. 2017, sec. 3.5): interleaved, PE(p, 2i) = sin(p / 10000^(2i/D)),
PE(p, 2i+1) = cos(p / 10000^(2i/D)).
``fairseq`` (fairseq / tensor2tensor): concatenated halves, sin in dims [0, D/2), cos in
[D/2, D), with frequencies exp(-i * log(10000) / (D/2 - 1)), i = 0 .. D/2-1. The highest
frequency is the same, the lowest is exactly 1/10000 rather than 10000^(-(D-2)/D).
"""

import math

import torch
import torch.nn as nn

from posenc.encodings.positions import make_positions

SINUSOID_VARIANTS = ("paper", "fairseq")


def sinusoid_frequencies(dim: int, variant: str = "paper", dtype=torch.float32) -> torch.Tensor:
    """Angular frequency of each sin/cos pair, ``(D // 2,)``, highest first."""
    half = dim // 2
    i = torch.arange(half, dtype=dtype)
    if variant == "paper":
        return torch.exp(-(2 * i / dim) * math.log(10000.0))
    if variant == "fairseq":
        return torch.exp(-i * (math.log(10000.0) / (half - 1)))
    raise ValueError(f"unknown sinusoid variant {variant!r}; allowed: {', '.join(SINUSOID_VARIANTS)}")


def sinusoid_table(num_positions: int, dim: int, variant: str = "paper", padding_idx=None, dtype=torch.float32) -> torch.Tensor:
    """Rows PE(0) .. PE(num_positions - 1), ``(num_positions, D)``.

    An odd ``D`` gets a zero last column (as fairseq does); row ``padding_idx``, if given, is zero.
    """
    if dim < 4:
        raise ValueError(f"sinusoid dimension must be at least 4, got {dim}")
    freqs = sinusoid_frequencies(dim, variant, dtype)
    angles = torch.arange(num_positions, dtype=dtype)[:, None] * freqs[None, :]
    if variant == "paper":
        table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=2).flatten(1)
    else:
        table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2 == 1:
        table = torch.cat([table, torch.zeros(num_positions, 1, dtype=dtype)], dim=1)
    if padding_idx is not None:
        table[padding_idx, :] = 0
    return table


class SinusoidalPositionalEmbedding(nn.Module):
    """Sinusoid rows looked up by fairseq's padding-aware positions, times ``scale``.

    forward(tokens ``(B, T)``) -> ``(B, T, D)``; with ``incremental_state`` not None (one decoding
    step, ``tokens`` the whole prefix) -> ``(B, 1, D)`` for the newest position.
    No parameters: the table is a non-persistent buffer that grows on demand.
    ``max_positions`` is what the model reports; the table itself has no limit.
    """

    def __init__(self, embedding_dim: int, padding_idx: int, variant: str = "fairseq", init_size: int = 1024,
                 scale: float = 1.0, max_positions: int = int(1e5)):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.variant = variant
        self.scale = float(scale)
        self.max_positions = max_positions
        self.register_buffer("weights", self._table(init_size), persistent=False)

    def _table(self, size: int) -> torch.Tensor:
        return sinusoid_table(size, self.embedding_dim, self.variant, self.padding_idx) * self.scale

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Older fairseq checkpoints stored the table and a dtype probe; both are derived here.
        for key in ("weights", "_float_tensor"):
            state_dict.pop(prefix + key, None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, tokens, incremental_state=None, timestep=None, positions=None):
        bsz, seq_len = tokens.shape[:2]
        needed = self.padding_idx + 1 + seq_len
        if needed > self.weights.size(0):
            self.weights = self._table(needed).to(self.weights)
        if incremental_state is not None:
            step = int(timestep.view(-1)[0]) + 1 if timestep is not None else seq_len
            return self.weights[self.padding_idx + step, :].expand(bsz, 1, -1)
        if positions is None:
            positions = make_positions(tokens, self.padding_idx)
        return self.weights.index_select(0, positions.reshape(-1)).view(bsz, seq_len, -1).detach()
