"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021).

Queries and keys are rotated pair by pair, dims (2i, 2i+1) by the angle ``m * theta_i`` with
``theta_i = base^(-2i/d)`` at position ``m``. The score <R(m) q, R(n) k> = <q, R(n - m) k> then
depends on the offset alone. No parameters; nothing is added to the token embeddings.
"""

import torch
import torch.nn as nn


class RotaryEmbedding(nn.Module):
    """``rotate(x, offset)`` for ``x`` of shape ``(..., T, d)`` with positions ``offset .. offset+T-1``.

    ``d`` (the head dimension) must be even. The cos/sin cache is a non-persistent buffer, so a
    model with RoPE has exactly the state dict of the same model without positions.
    """

    def __init__(self, head_dim: int, base: float = 10000.0, init_size: int = 1024):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        self.head_dim = head_dim
        self.base = float(base)
        self.register_buffer("inv_freq", base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim), persistent=False)
        cos, sin = self._angles(init_size)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _angles(self, size: int):
        angles = torch.arange(size, dtype=torch.float32, device=self.inv_freq.device)[:, None] * self.inv_freq[None, :]
        return angles.cos(), angles.sin()  # (size, d/2) each

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x`` ``(..., T, d)`` -> same shape, position ``offset + t`` applied to row ``t``."""
        seq_len = x.size(-2)
        end = offset + seq_len
        if end > self.cos.size(0):
            cos, sin = self._angles(max(end, 2 * self.cos.size(0)))
            self.cos, self.sin = cos, sin
        cos = self.cos[offset:end].to(x.dtype)
        sin = self.sin[offset:end].to(x.dtype)
        pairs = x.unflatten(-1, (-1, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.rotate(x, offset)
