"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021).

Queries and keys are rotated pair by pair, dims (2i, 2i+1) by the angle ``m * theta_i`` with
``theta_i = base^(-2i/d)`` at position ``m``. The score <R(m) q, R(n) k> = <q, R(n - m) k> then
depends on the offset alone. No parameters; nothing is added to the token embeddings.

Precision: the angle m * theta_i reaches thousands of radians, so a half-precision (or even a
float32) angle is off by more than the rotation it encodes. The angles are therefore formed in
float64, and only their cos and sin are kept, in float32, whatever the model's dtype: they are
plain attributes, not buffers, so ``model.half()`` / ``.to(torch.bfloat16)`` (what ``--fp16`` and
``--bf16`` do) cannot round them, and a cache that grows past its first size is rebuilt from the
float64 angles again, never from rounded frequencies. The rotation itself is done in float32 (or
the input's dtype, if wider) and only the product is cast back to the input's dtype.
"""

import torch
import torch.nn as nn

from posenc.encodings.defaults import ROPE_BASE


class RotaryEmbedding(nn.Module):
    """``rotate(x, offset)`` for ``x`` of shape ``(..., T, d)`` with positions ``offset .. offset+T-1``.

    ``d`` (the head dimension) must be even. Holds no parameters and no buffers, so a model with
    RoPE has exactly the state dict of the same model without positions.
    """

    CACHE_DTYPE = torch.float32

    def __init__(self, head_dim: int, base: float = ROPE_BASE, init_size: int = 1024):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        self.head_dim = head_dim
        self.base = float(base)
        self.init_size = int(init_size)
        self._cos = self._sin = None  # float32 (size, d/2), on the device of the last input

    def frequencies(self) -> torch.Tensor:
        """theta_i = base^(-2i/d), i = 0 .. d/2 - 1, float64 on the CPU."""
        return self.base ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)

    def angles(self, size: int) -> torch.Tensor:
        """The float64 angles m * theta_i of positions m = 0 .. size-1, ``(size, d/2)``."""
        return torch.arange(size, dtype=torch.float64)[:, None] * self.frequencies()[None, :]

    def cos_sin(self, end: int, device=None):
        """float32 ``(cos, sin)``, each ``(>= end, d/2)``, of positions 0 .. on ``device``."""
        device = torch.device(device) if device is not None else torch.device("cpu")
        if self._cos is None or self._cos.size(0) < end:
            size = max(end, 2 * self._cos.size(0) if self._cos is not None else self.init_size)
            angles = self.angles(size)
            self._cos = angles.cos().to(self.CACHE_DTYPE)
            self._sin = angles.sin().to(self.CACHE_DTYPE)
        if self._cos.device != device:
            self._cos, self._sin = self._cos.to(device), self._sin.to(device)
        return self._cos, self._sin

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x`` ``(..., T, d)`` -> same shape and dtype, position ``offset + t`` applied to row ``t``."""
        end = offset + x.size(-2)
        cos, sin = self.cos_sin(end, x.device)
        compute = torch.promote_types(x.dtype, self.CACHE_DTYPE)
        cos = cos[offset:end].to(compute)
        sin = sin[offset:end].to(compute)
        pairs = x.to(compute).unflatten(-1, (-1, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return rotated.to(x.dtype)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.rotate(x, offset)


def build_side(side):
    """The ``rope`` kind for one self-attention layer of a side (``posenc.kinds.Side``), with the
    base the plugin resolved into the args."""
    return RotaryEmbedding(side.embed_dim // side.num_heads, base=side.args.rope_base)
