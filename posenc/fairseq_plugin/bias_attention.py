"""Self-attention with a relative position bias on its logits (ALiBi, T5)."""

from fairseq.modules import MultiheadAttention

from posenc.fairseq_plugin.positional_attention import PositionalSelfAttention


class BiasedMultiheadAttention(PositionalSelfAttention):
    """Self-attention whose scaled logits get ``bias(T, S, offset)`` ``(H, T, S)`` added.

    The bias module belongs to the encoder or decoder and is shared by all its layers; each layer
    holds a plain reference, not a submodule, so its weights appear once in the state dict and
    once in ``parameters()``.
    """

    def __init__(self, embed_dim, num_heads, bias, dropout=0.0):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        if bias.num_heads != num_heads:
            raise ValueError(f"position bias has {bias.num_heads} heads, the attention {num_heads}")
        object.__setattr__(self, "shared_bias", bias)  # bypasses nn.Module registration on purpose

    @classmethod
    def from_attention(cls, attn: MultiheadAttention, bias, kind: str) -> "BiasedMultiheadAttention":
        """The biased twin of a stock self-attention module, with its weights."""
        cls.check_plain(attn, kind)
        biased = cls(attn.embed_dim, attn.num_heads, bias, dropout=attn.dropout_module.p)
        biased.load_state_dict(attn.state_dict())
        return biased

    def _position_bias(self, tgt_len, src_len, offset, like):
        return self.shared_bias(tgt_len, src_len, offset, dtype=like.dtype)

    def extra_repr(self):
        return f"shared_bias={type(self.shared_bias).__name__} (owned by the encoder/decoder)"
