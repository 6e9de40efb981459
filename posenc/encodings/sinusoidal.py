"""Fixed sinusoidal position encodings, in both published layouts.

``paper`` (Vaswani et al. 2017, sec. 3.5): interleaved, PE(p, 2i) = sin(p / b^(2i/D)),
PE(p, 2i+1) = cos(p / b^(2i/D)).
``fairseq`` (fairseq / tensor2tensor): concatenated halves, sin in dims [0, D/2), cos in
[D/2, D), with frequencies exp(-i * log(b) / (D/2 - 1)), i = 0 .. D/2-1. The highest
frequency is the same, the lowest is exactly 1/b rather than b^(-(D-2)/D).

The base b is 10000 in both papers (``SINUSOID_BASE``); it sets the longest wavelength.
"""

import math

import torch
import torch.nn as nn

from posenc.encodings.defaults import SINUSOID_BASE, SINUSOID_VARIANT, SINUSOID_VARIANTS, check_base
from posenc.encodings.positions import make_positions


def sinusoid_frequencies(dim: int, variant: str = "paper", dtype=torch.float32,
                         base: float = SINUSOID_BASE) -> torch.Tensor:
    """Angular frequency of each sin/cos pair, ``(D // 2,)``, highest (1) first, lowest ~1/base."""
    half = dim // 2
    i = torch.arange(half, dtype=dtype)
    log_base = math.log(check_base(base))
    if variant == "paper":
        return torch.exp(-(2 * i / dim) * log_base)
    if variant == "fairseq":
        return torch.exp(-i * (log_base / (half - 1)))
    raise ValueError(f"unknown sinusoid variant {variant!r}; allowed: {', '.join(SINUSOID_VARIANTS)}")


def sinusoid_table(num_positions: int, dim: int, variant: str = "paper", padding_idx=None, dtype=torch.float32,
                   base: float = SINUSOID_BASE) -> torch.Tensor:
    """Rows PE(0) .. PE(num_positions - 1), ``(num_positions, D)``.

    An odd ``D`` gets a zero last column (as fairseq does); row ``padding_idx``, if given, is zero.
    """
    if dim < 4:
        raise ValueError(f"sinusoid dimension must be at least 4, got {dim}")
    freqs = sinusoid_frequencies(dim, variant, dtype, base)
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


def model_sinusoid_table(num_positions: int, dim: int, padding_idx: int, variant: str = SINUSOID_VARIANT,
                         scale: float = 1.0, base: float = SINUSOID_BASE) -> torch.Tensor:
    """The float32 table a ``SinusoidalPositionalEmbedding`` looks rows up in, state-dict row
    numbering (row ``padding_idx`` zero, the first token at ``padding_idx + 1``). The analysis
    rebuilds a checkpoint's sinusoid with this very function, so its rows equal the model's."""
    return sinusoid_table(num_positions, dim, variant, padding_idx, base=base) * float(scale)


class SinusoidalPositionalEmbedding(nn.Module):
    """Sinusoid rows looked up by fairseq's padding-aware positions, times ``scale``.

    forward(tokens ``(B, T)``) -> ``(B, T, D)``; with ``incremental_state`` not None (one decoding
    step, ``tokens`` the whole prefix) -> ``(B, 1, D)`` for the newest position.
    No parameters: the table is a non-persistent buffer that grows on demand.
    ``max_positions`` is what the model reports; the table itself has no limit.
    """

    def __init__(self, embedding_dim: int, padding_idx: int, variant: str = SINUSOID_VARIANT, init_size: int = 1024,
                 scale: float = 1.0, max_positions: int = int(1e5), base: float = SINUSOID_BASE):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.variant = variant
        self.scale = float(scale)
        self.base = check_base(base)
        self.max_positions = max_positions
        self.register_buffer("weights", self._table(init_size), persistent=False)

    keeps_extra_state = False  # a subclass with state of its own (SHAPE's generator) sets True

    def _table(self, size: int) -> torch.Tensor:
        return model_sinusoid_table(size, self.embedding_dim, self.padding_idx, self.variant, self.scale, self.base)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Older fairseq checkpoints stored the table and a dtype probe; both are derived here. A
        # shape/cape side's state holds its shift generator (posenc.encodings.shifted), which the
        # plain sinusoid does not use: a SHAPE checkpoint loads into sinusoidal, as at inference.
        for key in ("weights", "_float_tensor") + (() if self.keeps_extra_state else ("_extra_state",)):
            state_dict.pop(prefix + key, None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def grow(self, needed: int) -> None:
        """Make the table hold rows ``0 .. needed - 1``."""
        if needed > self.weights.size(0):
            self.weights = self._table(needed).to(self.weights)

    def forward(self, tokens, incremental_state=None, timestep=None, positions=None):
        bsz, seq_len = tokens.shape[:2]
        self.grow(self.padding_idx + 1 + seq_len)
        if incremental_state is not None:
            step = int(timestep.view(-1)[0]) + 1 if timestep is not None else seq_len
            return self.weights[self.padding_idx + step, :].expand(bsz, 1, -1)
        if positions is None:
            positions = make_positions(tokens, self.padding_idx)
        return self.weights.index_select(0, positions.reshape(-1)).view(bsz, seq_len, -1).detach()


def sinusoid_arguments(side) -> dict:
    """The keyword arguments of a side's sinusoid (``posenc.kinds.Side``): the variant, scale and base
    the plugin resolved into the args. fconv's reports the stock learned limit; the Transformer's
    the module's own (the stock sinusoid's), as fairseq's does."""
    args = side.args
    common = {"variant": args.sinusoidal_variant, "scale": args.sinusoidal_scale, "base": args.sinusoidal_base}
    if side.family == "fconv":
        return {**common, "init_size": side.max_positions_arg, "max_positions": side.max_positions}
    return {**common, "init_size": side.max_positions_arg + side.padding_idx + 1}


def build_side(side):
    """The ``sinusoidal`` kind of a side (``posenc.kinds.Side``)."""
    return SinusoidalPositionalEmbedding(side.embed_dim, side.padding_idx, **sinusoid_arguments(side))
