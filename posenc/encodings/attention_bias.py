"""Relative position biases added to self-attention logits: ALiBi and T5's bucketed bias.

Both modules map ``(q_len, k_len, offset)`` to a bias ``(H, q_len, k_len)`` that the attention adds
to its scaled logits (queries at ``offset ..``, keys at ``0 ..``; see ``relative_positions``).
Neither adds anything to the token embeddings, and both work at any length.

One module serves every layer of a side (T5 shares its bias across layers; for ALiBi it lets all
layers reuse one cached bias). The part that depends on the lengths only is cached per
``(q_len, k_len, offset)``: the ALiBi bias itself, and T5's bucket indices (its bias is a lookup
into learned weights, so it is gathered afresh on each call and gradients reach the weights).
The cache keeps the last two lengths only: the layers of a side see the same lengths within
one forward, and an ``(H, T, S)`` bias per length of a long run would pile up memory.
"""

import math
from collections import OrderedDict

import torch
import torch.nn as nn

from posenc.encodings.positions import relative_positions

# T5's defaults (Raffel et al. 2020, sec. 2.1; mesh-tensorflow / HF T5): 32 buckets, and every
# distance from 128 on shares the last bucket of its direction.
T5_NUM_BUCKETS = 32
T5_MAX_DISTANCE = 128


def is_causal(side: str) -> bool:
    """Whether a side's self-attention bias is causal: the decoder's is, the encoder's is
    bidirectional (it sees keys on both sides of the query)."""
    if side not in ("encoder", "decoder"):
        raise ValueError(f"side must be encoder or decoder, got {side!r}")
    return side == "decoder"


def t5_init_std(embed_dim: int) -> float:
    """The std of T5's initial bias table (HF T5: normal, std d_model^-0.5)."""
    return embed_dim ** -0.5


class LengthCache:
    """A small LRU map from a hashable key to a tensor (lengths vary from batch to batch)."""

    def __init__(self, size: int = 2):
        self.size = size
        self.entries = OrderedDict()

    def get(self, key, make):
        value = self.entries.get(key)
        if value is None:
            value = self.entries[key] = make()
            if len(self.entries) > self.size:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        return value


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes m_h, ``(H,)`` float32 (Press et al., ICLR 2022, sec. 3).

    For H a power of two: the geometric sequence 2^(-8/H), 2^(-16/H), ..., 2^(-8). Otherwise the
    paper's rule: the slopes of the closest power of two n below H, then every other slope of 2n
    for the remaining H - n heads.
    """
    if num_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got {num_heads}")

    def power_of_two(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    n = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(n) + power_of_two(2 * n)[0::2][: num_heads - n]
    return torch.tensor(slopes, dtype=torch.float32)


class AlibiBias(nn.Module):
    """ALiBi: the fixed bias ``-m_h * distance``. No parameters, nothing in the state dict.

    ``causal`` (decoder): distance ``i - j`` for keys at or before the query; keys after it get 0
    (the causal mask removes them). Bidirectional (encoder): the symmetric ``|i - j|``, the common
    bidirectional variant (the paper only has causal models); its author suggests it for encoder
    attention (``torch.abs`` of the relative position, ofirpress/attention_with_linear_biases
    issue 5; checked).
    forward(q_len, k_len, offset=0, dtype=float32) -> ``(H, q_len, k_len)``.
    """

    def __init__(self, num_heads: int, causal: bool):
        super().__init__()
        self.num_heads = num_heads
        self.causal = causal
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)
        self._cache = LengthCache()

    def _make(self, q_len, k_len, offset, dtype):
        relative = relative_positions(q_len, k_len, offset, self.slopes.device)  # j - i
        distance = (-relative).clamp(min=0) if self.causal else relative.abs()
        return (-self.slopes[:, None, None] * distance[None].to(self.slopes.dtype)).to(dtype)

    def forward(self, q_len: int, k_len: int, offset: int = 0, dtype=torch.float32) -> torch.Tensor:
        # Inference tensors cannot be saved for backward: keep them apart from training ones.
        key = (q_len, k_len, offset, dtype, self.slopes.device, torch.is_inference_mode_enabled())
        return self._cache.get(key, lambda: self._make(q_len, k_len, offset, dtype))

    def extra_repr(self):
        return f"num_heads={self.num_heads}, causal={self.causal}"


def relative_position_bucket(relative: torch.Tensor, bidirectional: bool, num_buckets: int = T5_NUM_BUCKETS,
                             max_distance: int = T5_MAX_DISTANCE) -> torch.Tensor:
    """T5's bucket of each relative position ``key - query`` (any shape, long -> long).

    As mesh-tensorflow's / HF T5's ``_relative_position_bucket``: bidirectional, half the buckets
    for keys after the query and half for keys at or before it; causal, all buckets for keys at or
    before it (keys after it fall in bucket 0; the causal mask removes them). Within a direction,
    the first half of the buckets are exact distances 0 .. max_exact - 1, the rest log-spaced up to
    ``max_distance``, beyond which every distance shares the last bucket.
    """
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    max_exact = num_buckets // 2
    # float32 like the reference; clamp(min=1) only keeps log() finite where the exact branch wins.
    log_ratio = torch.log(distance.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


class T5RelativeBias(nn.Module):
    """T5's relative attention bias: one learned scalar per head and bucket, ``weight`` ``(buckets, H)``
    (the layout of T5's ``relative_attention_bias`` embedding).

    Bidirectional in the encoder, causal in the decoder. forward(q_len, k_len, offset=0,
    dtype=float32) -> ``(H, q_len, k_len)``.
    """

    def __init__(self, num_heads: int, causal: bool, init_std: float, num_buckets: int = T5_NUM_BUCKETS,
                 max_distance: int = T5_MAX_DISTANCE):
        super().__init__()
        self.num_heads = num_heads
        self.causal = causal
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.weight = nn.Parameter(torch.empty(num_buckets, num_heads))
        nn.init.normal_(self.weight, std=init_std)
        self._cache = LengthCache()

    def buckets(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """Bucket indices ``(q_len, k_len)`` long, cached per lengths."""
        def make():
            relative = relative_positions(q_len, k_len, offset, self.weight.device)
            return relative_position_bucket(relative, not self.causal, self.num_buckets, self.max_distance)
        return self._cache.get((q_len, k_len, offset, self.weight.device, torch.is_inference_mode_enabled()), make)

    def forward(self, q_len: int, k_len: int, offset: int = 0, dtype=torch.float32) -> torch.Tensor:
        bias = self.weight[self.buckets(q_len, k_len, offset)]  # (q_len, k_len, H)
        return bias.permute(2, 0, 1).to(dtype)

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, causal={self.causal}, num_buckets={self.num_buckets}, "
                f"max_distance={self.max_distance}")


def build_alibi(side):
    """The ``alibi`` kind of a side (``posenc.kinds.Side``): bidirectional in the encoder, causal in the decoder."""
    return AlibiBias(side.num_heads, is_causal(side.side))


def build_t5(side):
    """The ``t5`` kind of a side (``posenc.kinds.Side``): bidirectional in the encoder, causal in the
    decoder, its table drawn N(0, d^-0.5)."""
    return T5RelativeBias(side.num_heads, is_causal(side.side), init_std=t5_init_std(side.embed_dim))
