"""Sinusoids whose positions move at random while training, and only then.

- SHAPE (Kiyono et al., EMNLP 2021, "SHAPE: Shifted Absolute Position Embedding for
  Transformers", sec. 3), as its authors run it (butsugiri/shape, ``PositionalEncoding`` in
  ``onmt/modules/embeddings.py``): every position of a sequence is shifted by one offset k drawn
  per sequence from 0..K-1 (``torch.randint(0, K)``); at validation and inference every position
  is shifted by ``eval_offset``, their K (positions start at K, on both sides). ``eval_offset = 0``
  makes the model the plain sinusoid with the same weights at inference.
- CAPE (Likhomanenko et al., NeurIPS 2021, "CAPE: Encoding Relative Positions with Continuous
  Augmented Positional Embeddings", sec. 3; gcambara/cape's ``CAPE1d``): positions are continuous,
  x_i' = (x_i + Delta + epsilon_i) * lambda with a global shift Delta ~ U[-a, a] per sequence, a
  local shift epsilon_i ~ U[-b, b] per position and a global scaling log lambda ~ U[-log c, log c]
  per sequence; at inference x_i' = x_i, the plain continuous sinusoid. CAPE1d's ``normalize``
  (centring positions on their mean) is off, its default; ``freq_scale`` is the sinusoid's base.

Both draw their shifts from a ``torch.Generator`` of their own, seeded from the cell's seed
(fairseq's ``args.seed``) and the side, never from the global RNG: a training step leaves the
global RNG, and so every dropout mask after it, as ``sinusoidal`` leaves it. The generator's state
is the module's extra state (``<side>.embed_positions._extra_state`` in the state dict), so a
checkpoint saves it and a resumed cell draws what an uninterrupted one would; a state dict without
it (written before) loads and keeps the freshly seeded generator.

Both keep fairseq's numbering so that at inference they equal ``sinusoidal`` row for row: x_i is
the 0-based index of a real token from the first real one, and the angle is taken at
``padding_idx + 1 + x_i'`` (the offset fairseq's sinusoid has); pads get zero. Their frequencies,
layout (``paper`` / ``fairseq``), base and scale are the sinusoid's options.
"""

import hashlib
import math

import torch
import torch.nn as nn

from posenc.encodings.defaults import SINUSOID_BASE, SINUSOID_VARIANT
from posenc.encodings.positions import make_positions
from posenc.encodings.sinusoidal import SinusoidalPositionalEmbedding, sinusoid_arguments, sinusoid_frequencies


def shift_seed(seed: int, kind: str, side: str) -> int:
    """The seed of a side's shift generator: the cell's seed, the kind and the side (so that the
    encoder and the decoder draw independent shifts), hashed to 63 bits."""
    return int(hashlib.sha256(f"{kind}:{side}:{int(seed)}".encode()).hexdigest()[:15], 16)


class OwnShiftGenerator:
    """Mixin (before the ``nn.Module`` base) of a module whose random draws in training come from
    ``self.generator``, a CPU ``torch.Generator`` seeded once (``seed_generator``), saved and
    restored as the module's extra state."""

    def seed_generator(self, seed: int) -> None:
        self.generator = torch.Generator()
        self.generator.manual_seed(int(seed))

    def get_extra_state(self):
        return self.generator.get_state()

    def set_extra_state(self, state):
        self.generator.set_state(state)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + "_extra_state"
        absent = key not in state_dict
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if absent and key in missing_keys:  # a state dict written before the generator was saved
            missing_keys.remove(key)


class ShiftedSinusoidalEmbedding(OwnShiftGenerator, SinusoidalPositionalEmbedding):
    """SHAPE: ``sinusoidal`` with every real position of a sequence moved by k, drawn per sequence
    from 0..max_shift-1 while ``training`` (full sequences; a decoding step is never training), and
    by ``eval_offset`` otherwise (validation, inference, every decoding step)."""

    keeps_extra_state = True  # the generator's state, which the plain sinusoid drops

    def __init__(self, embedding_dim: int, padding_idx: int, max_shift: int, eval_offset: int = 0, seed: int = 0,
                 **sinusoid):
        super().__init__(embedding_dim, padding_idx, **sinusoid)
        if max_shift < 0 or eval_offset < 0:
            raise ValueError(f"SHAPE's maximum shift and inference offset must be at least 0, got {max_shift} and "
                             f"{eval_offset}")
        self.max_shift = int(max_shift)
        self.eval_offset = int(eval_offset)
        self.seed_generator(seed)

    def draw_shifts(self, bsz: int) -> torch.Tensor:
        """k for each of ``bsz`` sequences, from 0..max_shift-1 (as the authors' ``randint(0, K)``),
        ``(bsz, 1)`` on the CPU; zeros when max_shift is 0 (nothing drawn)."""
        if not self.max_shift:
            return torch.zeros(bsz, 1, dtype=torch.long)
        return torch.randint(0, self.max_shift, (bsz, 1), generator=self.generator)

    def forward(self, tokens, incremental_state=None, timestep=None, positions=None):
        bsz, seq_len = tokens.shape[:2]
        training = self.training and incremental_state is None
        shift = self.draw_shifts(bsz).to(tokens.device) if training else self.eval_offset
        if incremental_state is not None:
            step = int(timestep.view(-1)[0]) + 1 if timestep is not None else seq_len
            self.grow(self.padding_idx + 1 + step + shift)
            return self.weights[self.padding_idx + step + shift, :].expand(bsz, 1, -1)
        if training or shift:
            if positions is None:
                positions = make_positions(tokens, self.padding_idx)
            positions = torch.where(positions.ne(self.padding_idx), positions + shift, positions)
            self.grow(self.padding_idx + 1 + seq_len + max(self.max_shift, self.eval_offset))
        return super().forward(tokens, None, None, positions)

    def extra_repr(self):
        return f"max_shift={self.max_shift}, eval_offset={self.eval_offset}"


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


class CapeEmbedding(OwnShiftGenerator, nn.Module):
    """CAPE's continuous augmented sinusoid. forward(tokens ``(B, T)``) -> ``(B, T, D)``; with
    ``incremental_state`` not None (``tokens`` the whole prefix) -> ``(B, 1, D)``, the newest
    position. No parameters; the frequencies are float32 outside the buffers (``model.half()``
    cannot round them) and only the product is cast to the model's dtype."""

    def __init__(self, embedding_dim: int, padding_idx: int, variant: str = SINUSOID_VARIANT, scale: float = 1.0,
                 base: float = SINUSOID_BASE, max_positions: int = int(1e5),
                 max_global_shift: float = 0.0, max_local_shift: float = 0.0, max_global_scaling: float = 1.0,
                 seed: int = 0):
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
        self.seed_generator(seed)

    def augment(self, index: torch.Tensor) -> torch.Tensor:
        """``(x + Delta + epsilon) * lambda`` of 0-based float positions ``(B, T)``, drawn afresh
        from the module's generator (on the CPU, then moved to ``index``'s device)."""
        bsz, seq_len = index.shape
        draw = {"generator": self.generator, "dtype": index.dtype}
        shift = (torch.rand(bsz, 1, **draw) * 2 - 1) * self.max_global_shift
        local = (torch.rand(bsz, seq_len, **draw) * 2 - 1) * self.max_local_shift
        log_scale = (torch.rand(bsz, 1, **draw) * 2 - 1) * math.log(self.max_global_scaling)
        shift, local, log_scale = (t.to(index.device) for t in (shift, local, log_scale))
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


def side_seed(side, kind: str) -> int:
    """The seed of a side's generator: the cell's seed (fairseq's ``--seed``, 1 unless set), the kind
    and the side."""
    seed = getattr(side.args, "seed", None)
    return shift_seed(1 if seed is None else seed, kind, side.side)


def build_shape(side):
    """The ``shape`` kind of a side (``posenc.kinds.Side``): the side's sinusoid, shifted in training."""
    args = side.args
    return ShiftedSinusoidalEmbedding(side.embed_dim, side.padding_idx, args.shape_max_shift,
                                      eval_offset=args.shape_eval_offset, seed=side_seed(side, "shape"),
                                      **sinusoid_arguments(side))


def build_cape(side):
    """The ``cape`` kind of a side (``posenc.kinds.Side``): the side's sinusoid made continuous and
    augmented in training."""
    args = side.args
    sinusoid = {k: v for k, v in sinusoid_arguments(side).items() if k != "init_size"}
    return CapeEmbedding(side.embed_dim, side.padding_idx, **sinusoid, max_global_shift=args.cape_max_global_shift,
                         max_local_shift=args.cape_max_local_shift, max_global_scaling=args.cape_max_global_scaling,
                         seed=side_seed(side, "cape"))


__all__ = ["CapeEmbedding", "OwnShiftGenerator", "ShiftedSinusoidalEmbedding", "build_cape", "build_shape",
           "continuous_sinusoid", "shift_seed", "side_seed"]
