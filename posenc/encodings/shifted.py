"""Sinusoids whose positions move at random while training, and only then.

- SHAPE (Kiyono et al., EMNLP 2021, "SHAPE: Shifted Absolute Position Embedding for
  Transformers", sec. 3): every position of a sequence is shifted by one offset k ~ U{0..K}, drawn
  per sequence; at inference k = 0, so the model is the plain sinusoid with the same weights.
- CAPE (Likhomanenko et al., NeurIPS 2021, "CAPE: Encoding Relative Positions with Continuous
  Augmented Positional Embeddings", sec. 3; gcambara/cape's ``CAPE1d``): positions are continuous,
  x_i' = (x_i + Delta + epsilon_i) * lambda with a global shift Delta ~ U[-a, a] per sequence, a
  local shift epsilon_i ~ U[-b, b] per position and a global scaling log lambda ~ U[-log c, log c]
  per sequence; at inference x_i' = x_i, the plain continuous sinusoid. CAPE1d's ``normalize``
  (centring positions on their mean) is off, its default; ``freq_scale`` is the sinusoid's base.

Both keep fairseq's numbering so that at inference they equal ``sinusoidal`` row for row: x_i is
the 0-based index of a real token from the first real one, and the angle is taken at
``padding_idx + 1 + x_i'`` (the offset fairseq's sinusoid has); pads get zero. Their frequencies,
layout (``paper`` / ``fairseq``), base and scale are the sinusoid's options.
"""

import math

import torch
import torch.nn as nn

from posenc.encodings.defaults import SINUSOID_BASE, SINUSOID_VARIANT
from posenc.encodings.positions import make_positions
from posenc.encodings.sinusoidal import SinusoidalPositionalEmbedding, sinusoid_arguments, sinusoid_frequencies


class ShiftedSinusoidalEmbedding(SinusoidalPositionalEmbedding):
    """SHAPE: ``sinusoidal`` with every real position of a sequence moved by k ~ U{0..max_shift}
    while ``training`` (full sequences; a decoding step is never training)."""

    def __init__(self, embedding_dim: int, padding_idx: int, max_shift: int, **sinusoid):
        super().__init__(embedding_dim, padding_idx, **sinusoid)
        if max_shift < 0:
            raise ValueError(f"SHAPE's maximum shift must be at least 0, got {max_shift}")
        self.max_shift = int(max_shift)

    def forward(self, tokens, incremental_state=None, timestep=None, positions=None):
        if self.training and self.max_shift and incremental_state is None:
            if positions is None:
                positions = make_positions(tokens, self.padding_idx)
            shift = torch.randint(0, self.max_shift + 1, (tokens.size(0), 1), device=tokens.device)
            positions = torch.where(positions.ne(self.padding_idx), positions + shift, positions)
            self.grow(self.padding_idx + 1 + tokens.size(1) + self.max_shift)
        return super().forward(tokens, incremental_state, timestep, positions)

    def extra_repr(self):
        return f"max_shift={self.max_shift}"


def continuous_sinusoid(positions: torch.Tensor, freqs: torch.Tensor, variant: str, dim: int) -> torch.Tensor:
    """The sinusoid at real-valued ``positions`` ``(...)`` -> ``(..., dim)``, in ``variant``'s
    layout (as ``sinusoid_table``; an odd ``dim`` gets a zero last column)."""
    angles = positions[..., None] * freqs
    if variant == "paper":
        table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)
    else:
        table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    if dim % 2 == 1:
        table = torch.cat([table, table.new_zeros(*table.shape[:-1], 1)], dim=-1)
    return table


class CapeEmbedding(nn.Module):
    """CAPE's continuous augmented sinusoid. forward(tokens ``(B, T)``) -> ``(B, T, D)``; with
    ``incremental_state`` not None (``tokens`` the whole prefix) -> ``(B, 1, D)``, the newest
    position. No parameters; the frequencies are float32 outside the buffers (``model.half()``
    cannot round them) and only the product is cast to the model's dtype."""

    def __init__(self, embedding_dim: int, padding_idx: int, variant: str = SINUSOID_VARIANT, scale: float = 1.0,
                 base: float = SINUSOID_BASE, max_positions: int = int(1e5),
                 max_global_shift: float = 0.0, max_local_shift: float = 0.0, max_global_scaling: float = 1.0):
        super().__init__()
        if max_global_shift < 0 or max_local_shift < 0 or max_global_scaling < 1:
            raise ValueError("CAPE needs max_global_shift >= 0, max_local_shift >= 0 and max_global_scaling >= 1, "
                             f"got {max_global_shift:g}, {max_local_shift:g}, {max_global_scaling:g}")
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.variant = variant
        self.scale = float(scale)
        self.max_positions = max_positions
        self.max_global_shift = float(max_global_shift)
        self.max_local_shift = float(max_local_shift)
        self.max_global_scaling = float(max_global_scaling)
        self.freqs = sinusoid_frequencies(embedding_dim, variant, torch.float32, base)
        self.register_buffer("_dtype", torch.zeros(0), persistent=False)  # follows .half() / .to(dtype)

    def augment(self, index: torch.Tensor) -> torch.Tensor:
        """``(x + Delta + epsilon) * lambda`` of 0-based float positions ``(B, T)``, drawn afresh."""
        bsz, seq_len = index.shape
        draw = {"device": index.device, "dtype": index.dtype}
        shift = (torch.rand(bsz, 1, **draw) * 2 - 1) * self.max_global_shift
        local = (torch.rand(bsz, seq_len, **draw) * 2 - 1) * self.max_local_shift
        log_scale = (torch.rand(bsz, 1, **draw) * 2 - 1) * math.log(self.max_global_scaling)
        return (index + shift + local) * torch.exp(log_scale)

    def forward(self, tokens, incremental_state=None, timestep=None, positions=None):
        bsz, seq_len = tokens.shape[:2]
        if positions is None:
            positions = make_positions(tokens, self.padding_idx)
        if incremental_state is not None:
            step = int(timestep.view(-1)[0]) + 1 if timestep is not None else seq_len
            positions = torch.full((bsz, 1), self.padding_idx + step, device=tokens.device)
        real = positions.ne(self.padding_idx)
        index = (positions - self.padding_idx - 1).to(torch.float32)  # 0 at the first real token
        if self.training and incremental_state is None:
            index = self.augment(index)
        if self.freqs.device != tokens.device:
            self.freqs = self.freqs.to(tokens.device)
        table = continuous_sinusoid(index + (self.padding_idx + 1), self.freqs, self.variant, self.embedding_dim)
        return (table * self.scale * real[..., None]).to(self._dtype.dtype)

    def extra_repr(self):
        return (f"max_global_shift={self.max_global_shift:g}, max_local_shift={self.max_local_shift:g}, "
                f"max_global_scaling={self.max_global_scaling:g}")


def build_shape(side):
    """The ``shape`` kind of a side (``posenc.kinds.Side``): the side's sinusoid, shifted in training."""
    return ShiftedSinusoidalEmbedding(side.embed_dim, side.padding_idx, side.args.shape_max_shift,
                                      **sinusoid_arguments(side))


def build_cape(side):
    """The ``cape`` kind of a side (``posenc.kinds.Side``): the side's sinusoid made continuous and
    augmented in training."""
    args = side.args
    sinusoid = {k: v for k, v in sinusoid_arguments(side).items() if k != "init_size"}
    return CapeEmbedding(side.embed_dim, side.padding_idx, **sinusoid, max_global_shift=args.cape_max_global_shift,
                         max_local_shift=args.cape_max_local_shift, max_global_scaling=args.cape_max_global_scaling)


__all__ = ["CapeEmbedding", "ShiftedSinusoidalEmbedding", "build_cape", "build_shape", "continuous_sinusoid"]
