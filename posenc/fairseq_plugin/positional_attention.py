"""Self-attention with a position signal inside it, for fairseq's Transformer layers.

fairseq's ``MultiheadAttention`` runs a fused kernel in training that never exposes the
projected queries and keys or takes a per-head bias, so position kinds that act in attention
need their own forward. This one covers the full-sequence and the incremental path; a subclass
says what the position signal does through two hooks: ``_position_qk`` (rotate queries and keys
before keys are cached: RoPE) and ``_position_bias`` (an ``(H, T, S)`` bias added to the scaled
logits: ALiBi, T5). Queries sit at ``offset ..``, where ``offset`` is the number of cached steps,
keys at ``0 ..``. The module has exactly the parameters (and state-dict keys) of the stock one.
"""

from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor


class PositionalSelfAttention(MultiheadAttention):
    """Self-attention only. Input/output ``(T, B, C)`` as in fairseq."""

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__(embed_dim, num_heads, dropout=dropout, self_attention=True)

    @staticmethod
    def check_plain(attn: MultiheadAttention, kind: str) -> None:
        if not attn.self_attention or attn.use_xformers or attn.bias_k is not None or attn.add_zero_attn:
            raise ValueError(f"{kind}: only plain self-attention can carry positions (no cross-self-attention, "
                             "xformers, bias_kv or zero_attn)")

    def _position_qk(self, q: Tensor, k: Tensor, offset: int):
        """``q``, ``k`` ``(B, H, T, Dh)`` of the new steps -> the same, position applied."""
        return q, k

    def _position_bias(self, tgt_len: int, src_len: int, offset: int, like: Tensor) -> Optional[Tensor]:
        """An additive bias ``(H, tgt_len, src_len)`` of ``like``'s dtype, or None."""
        return None

    def _split_heads(self, x: Tensor, bsz: int) -> Tensor:
        """``(T, B, C)`` -> ``(B, H, T, Dh)``"""
        return x.view(x.size(0), bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ):
        tgt_len, bsz, embed_dim = query.size()
        q = self._split_heads(self.q_proj(query), bsz)
        k = self._split_heads(self.k_proj(query), bsz)
        v = self._split_heads(self.v_proj(query), bsz)

        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        offset = saved["prev_key"].size(2) if saved and saved.get("prev_key") is not None else 0
        q, k = self._position_qk(q, k, offset)
        if saved is not None:
            if offset:
                k = torch.cat([saved["prev_key"], k], dim=2)
                v = torch.cat([saved["prev_value"], v], dim=2)
            key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
                key_padding_mask=key_padding_mask, prev_key_padding_mask=saved.get("prev_key_padding_mask"),
                batch_size=bsz, src_len=k.size(2), static_kv=False)
            saved["prev_key"], saved["prev_value"] = k, v  # (B, H, S, Dh), fairseq's cache layout
            saved["prev_key_padding_mask"] = key_padding_mask
            self._set_input_buffer(incremental_state, saved)

        mask = self._additive_mask(attn_mask, key_padding_mask, q)
        bias = self._position_bias(tgt_len, k.size(2), offset, q)
        if bias is not None:
            mask = bias if mask is None else mask + bias  # broadcasts to (B, H, T, S)
        dropout_p = self.dropout_module.p if (self.training or self.dropout_module.apply_during_inference) else 0.0
        if need_weights or need_head_weights or before_softmax:
            return self._explicit_attention(q, k, v, mask, dropout_p, tgt_len, bsz, embed_dim,
                                            before_softmax, need_head_weights)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim)), None

    @staticmethod
    def _additive_mask(attn_mask, key_padding_mask, like: Tensor) -> Optional[Tensor]:
        """fairseq's masks as one additive float mask broadcasting to ``(B, H, T, S)``."""
        mask = None
        if attn_mask is not None:  # (T, S), float -inf above the diagonal (or bool)
            mask = attn_mask.to(like.dtype) if attn_mask.dtype != torch.bool else \
                torch.zeros_like(attn_mask, dtype=like.dtype).masked_fill(attn_mask, float("-inf"))
        if key_padding_mask is not None and key_padding_mask.dim() > 0:  # (B, S), True at pads
            pad = torch.zeros(key_padding_mask.shape, dtype=like.dtype, device=like.device)
            pad = pad.masked_fill(key_padding_mask.to(torch.bool), float("-inf"))[:, None, None, :]
            mask = pad if mask is None else mask + pad
        return mask

    def _explicit_attention(self, q, k, v, mask, dropout_p, tgt_len, bsz, embed_dim, before_softmax, need_head_weights):
        scores = torch.matmul(q * self.scaling, k.transpose(-1, -2))  # (B, H, T, S)
        if mask is not None:
            scores = scores + mask
        if before_softmax:
            return scores.view(bsz * self.num_heads, tgt_len, -1), v.reshape(bsz * self.num_heads, -1, self.head_dim)
        weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(F.dropout(weights, p=dropout_p, training=dropout_p > 0), v)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim))
        head_weights = weights.transpose(0, 1)  # (H, B, T, S), as fairseq returns them
        return out, head_weights if need_head_weights else head_weights.mean(dim=0)
