"""One self-attention forward with optional position terms, for fairseq's Transformer layers.

fairseq's ``MultiheadAttention`` runs a fused kernel in training that never exposes the projected
queries and keys, takes no per-head bias and has no place for a value term, so position kinds that
act in attention need their own forward. This is the only one; a layer carries any of the terms a
kind's registration provides (``posenc.kinds``), as x-transformers' ``Attention.forward`` takes
``rotary_pos_emb``, ``attn_bias`` and ``rel_pos``:

- ``rotary`` (``queries_keys``): ``rotary(x, offset)`` applied to the queries and keys before the
  keys are cached (RoPE); the layer's own module.
- ``shared_bias`` (``logits``): ``(H, T, S)`` added to the scaled logits, from one module the side
  owns (ALiBi, T5); with ``uses_query``, given the scaled queries and may return ``(B, H, T, S)``.
- ``relative`` (``keys_values``): a term added to the keys, seen as ``q . a^K_ij`` in the logits,
  and one added to the values, ``sum_j alpha_ij a^V_ij`` (Shaw et al. 2018); the layer's own.

The full-sequence and the incremental path are one code path: queries sit at ``offset ..``, where
``offset`` is the number of cached steps, keys at ``0 ..``. Without ``relative`` and without asked-for
weights the product runs in ``scaled_dot_product_attention``; a value term needs the weights, so
``relative`` takes the explicit path. The module has the stock one's parameters plus ``relative``'s.
"""

from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from posenc.kinds import KEYS_VALUES, LOGITS, QUERIES_KEYS

# Which term of the attention each act provides (the keyword of ``from_attention``).
ATTENTION_TERMS = {QUERIES_KEYS: "rotary", LOGITS: "bias", KEYS_VALUES: "relative"}


class PositionalSelfAttention(MultiheadAttention):
    """Self-attention only. Input/output ``(T, B, C)`` as in fairseq."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, rotary=None, bias=None, relative=None):
        super().__init__(embed_dim, num_heads, dropout=dropout, self_attention=True)
        self.rotary = rotary
        if bias is not None and getattr(bias, "num_heads", num_heads) != num_heads:
            raise ValueError(f"position bias has {bias.num_heads} heads, the attention {num_heads}")
        # The bias belongs to the encoder or decoder and is shared by its layers: a plain reference,
        # not a submodule, so its weights appear once in the state dict and in ``parameters()``.
        object.__setattr__(self, "shared_bias", bias)
        self.bias_uses_query = bool(getattr(bias, "uses_query", False))
        self.relative = relative

    @classmethod
    def from_attention(cls, attn: MultiheadAttention, kind: str, rotary=None, bias=None,
                       relative=None) -> "PositionalSelfAttention":
        """The twin of a stock self-attention module, with its weights and the given terms."""
        if not attn.self_attention or attn.use_xformers or attn.bias_k is not None or attn.add_zero_attn:
            raise ValueError(f"{kind}: only plain self-attention can carry positions (no cross-self-attention, "
                             "xformers, bias_kv or zero_attn)")
        twin = cls(attn.embed_dim, attn.num_heads, dropout=attn.dropout_module.p, rotary=rotary, bias=bias)
        twin.load_state_dict(attn.state_dict())
        twin.relative = relative  # after loading: its parameters are the kind's own, not the stock module's
        return twin

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
        if self.rotary is not None:
            q, k = self.rotary(q, offset), self.rotary(k, offset)
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

        src_len = k.size(2)
        mask = self._additive_mask(attn_mask, key_padding_mask, q)
        bias = None
        if self.shared_bias is not None:
            bias = (self.shared_bias(tgt_len, src_len, offset, dtype=q.dtype, query=q * self.scaling)
                    if self.bias_uses_query else self.shared_bias(tgt_len, src_len, offset, dtype=q.dtype))
            mask = bias if mask is None else mask + bias  # broadcasts to (B, H, T, S)
        dropout_p = self.dropout_module.p if (self.training or self.dropout_module.apply_during_inference) else 0.0
        if need_weights or need_head_weights or before_softmax or self.relative is not None:
            return self._explicit_attention(q, k, v, mask, dropout_p, offset, tgt_len, bsz, embed_dim,
                                            before_softmax, need_weights or need_head_weights, need_head_weights)
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

    def _explicit_attention(self, q, k, v, mask, dropout_p, offset, tgt_len, bsz, embed_dim, before_softmax,
                            return_weights, need_head_weights):
        q = q * self.scaling
        scores = torch.matmul(q, k.transpose(-1, -2))  # (B, H, T, S)
        if self.relative is not None:
            scores = scores + self.relative.key_logits(q, k.size(2), offset)
        if mask is not None:
            scores = scores + mask
        if before_softmax:
            return scores.view(bsz * self.num_heads, tgt_len, -1), v.reshape(bsz * self.num_heads, -1, self.head_dim)
        weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
        dropped = F.dropout(weights, p=dropout_p, training=dropout_p > 0)
        out = torch.matmul(dropped, v)
        if self.relative is not None:
            out = out + self.relative.value_term(dropped, offset)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim))
        if not return_weights:
            return out, None
        head_weights = weights.transpose(0, 1)  # (H, B, T, S), as fairseq returns them
        return out, head_weights if need_head_weights else head_weights.mean(dim=0)

    def extra_repr(self):
        if self.shared_bias is None:
            return ""
        return f"shared_bias={type(self.shared_bias).__name__} (owned by the encoder/decoder)"
