"""Shaw et al. (2018), "Self-Attention with Relative Position Representations" (NAACL), sec. 3.

Learned vectors of the clipped relative distance are added to the keys and to the values of
self-attention (eq. 3-4, with eq. 5-6 for the vectors):

    e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z)
    z_i  = sum_j alpha_ij (x_j W^V + a^V_ij)
    a^K_ij = w^K_clip(j - i, k),  a^V_ij = w^V_clip(j - i, k),  clip(x, k) = max(-k, min(k, x))

``w^K`` and ``w^V`` are ``(2k + 1, head_dim)``, shared by the heads of a layer and separate per
layer, as in the paper's sec. 3.3 and tensor2tensor's ``dot_product_attention_relative`` (one
``[2k+1, depth]`` table per layer); ``heads="per_head"`` gives each head of a layer its own, as the
paper's sec. 4.1 describes its base model: ``(2k + 1, heads * head_dim)``, head h's vectors in
columns ``h * head_dim ..``. The logits' term is computed as in tensor2tensor's
``dot_product_attention_relative`` restated for a table of distances: ``q . w^K_r`` for the
``2k + 1`` distances r, then gathered at each pair's distance, so the cost is ``T x (2k+1)`` dot
products rather than ``T x S``; the values' term sums the weights of each distance first, then
multiplies once by ``w^V``. Queries sit at ``offset ..`` (cached decoding steps), keys at ``0 ..``;
only differences count, so left padding moves nothing.
"""

import torch
import torch.nn as nn

from posenc.encodings.attention_bias import LengthCache
from posenc.encodings.defaults import SHAW_HEADS
from posenc.encodings.positions import relative_positions


def clipped_distances(q_len: int, k_len: int, offset: int, max_distance: int, device=None) -> torch.Tensor:
    """``clip(j - i, k) + k``, the row of ``w`` each pair uses, ``(q_len, k_len)`` long."""
    relative = relative_positions(q_len, k_len, offset, device)
    return relative.clamp(-max_distance, max_distance) + max_distance


class ShawRelativePositions(nn.Module):
    """``keys.weight`` = w^K and ``values.weight`` = w^V, each ``(2k + 1, head_dim)``; row ``r + k``
    is distance ``r`` (key - query). Initialised Glorot-uniform, like fairseq's projections (a
    choice made here; the paper does not give one)."""

    def __init__(self, head_dim: int, max_distance: int, heads: str = "shared", num_heads: int = 1):
        super().__init__()
        if max_distance < 1:
            raise ValueError(f"Shaw's clipping distance must be at least 1, got {max_distance}")
        if heads not in SHAW_HEADS:
            raise ValueError(f"Shaw's heads={heads!r} is not allowed; allowed: {', '.join(SHAW_HEADS)}")
        self.max_distance = int(max_distance)
        self.heads = heads
        self.num_heads = int(num_heads) if heads == "per_head" else 1
        self.head_dim = int(head_dim)
        self.keys = nn.Embedding(2 * self.max_distance + 1, self.num_heads * head_dim)
        self.values = nn.Embedding(2 * self.max_distance + 1, self.num_heads * head_dim)
        nn.init.xavier_uniform_(self.keys.weight)
        nn.init.xavier_uniform_(self.values.weight)
        self._cache = LengthCache()

    def distances(self, q_len: int, k_len: int, offset: int) -> torch.Tensor:
        """The rows of w each (query, key) pair uses, ``(q_len, k_len)``, cached per lengths."""
        key = (q_len, k_len, offset, self.keys.weight.device, torch.is_inference_mode_enabled())
        return self._cache.get(key, lambda: clipped_distances(q_len, k_len, offset, self.max_distance,
                                                               self.keys.weight.device))

    def key_logits(self, q: torch.Tensor, k_len: int, offset: int = 0) -> torch.Tensor:
        """``q . a^K_ij`` for scaled queries ``q`` ``(B, H, T, Dh)`` -> ``(B, H, T, k_len)``."""
        if self.heads == "per_head":
            table = self.keys.weight.to(q.dtype).view(-1, self.num_heads, self.head_dim)  # (2k+1, H, Dh)
            per_distance = torch.einsum("bhtd,rhd->bhtr", q, table)
        else:
            per_distance = torch.matmul(q, self.keys.weight.to(q.dtype).t())  # (B, H, T, 2k+1)
        rows = self.distances(q.size(2), k_len, offset)
        return torch.gather(per_distance, -1, rows.expand(*q.shape[:2], -1, -1))

    def value_term(self, weights: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``sum_j alpha_ij a^V_ij`` for weights ``(B, H, T, S)`` -> ``(B, H, T, Dh)``."""
        rows = self.distances(weights.size(2), weights.size(3), offset).expand_as(weights)
        per_distance = weights.new_zeros(*weights.shape[:3], self.values.num_embeddings)
        per_distance = per_distance.scatter_add(-1, rows, weights)  # the weight each distance gets
        if self.heads == "per_head":
            table = self.values.weight.to(weights.dtype).view(-1, self.num_heads, self.head_dim)
            return torch.einsum("bhtr,rhd->bhtd", per_distance, table)
        return torch.matmul(per_distance, self.values.weight.to(weights.dtype))

    def extra_repr(self):
        return f"max_distance={self.max_distance}, heads={self.heads}"


def build_side(side):
    """The ``shaw`` kind for one self-attention layer of a side (``posenc.kinds.Side``), with the
    clipping distance the plugin resolved into the args."""
    return ShawRelativePositions(side.head_dim, side.args.shaw_max_distance, side.args.shaw_heads, side.num_heads)


__all__ = ["SHAW_HEADS", "ShawRelativePositions", "build_side", "clipped_distances"]
