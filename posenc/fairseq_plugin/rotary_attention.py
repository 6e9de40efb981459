"""Self-attention with rotary positions: queries and keys rotated before keys are cached, so a
decoding step's position is the cached length (see ``positional_attention``)."""

from fairseq.modules import MultiheadAttention

from posenc.encodings import RotaryEmbedding
from posenc.encodings.defaults import ROPE_BASE
from posenc.fairseq_plugin.positional_attention import PositionalSelfAttention


class RotaryMultiheadAttention(PositionalSelfAttention):
    """Self-attention only. Input/output ``(T, B, C)`` as in fairseq."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, rope_base=ROPE_BASE):
        super().__init__(embed_dim, num_heads, dropout=dropout)
        self.rotary = RotaryEmbedding(self.head_dim, base=rope_base)

    @classmethod
    def from_attention(cls, attn: MultiheadAttention, rope_base: float = ROPE_BASE, rotary=None,
                       kind: str = "rope") -> "RotaryMultiheadAttention":
        """The rotary twin of a stock self-attention module, with its weights. ``rotary``: the
        module applied to queries and keys (``rotary(x, offset)``; a kind's own, built through
        ``posenc.kinds``), else a RotaryEmbedding of ``rope_base``."""
        cls.check_plain(attn, kind)
        twin = cls(attn.embed_dim, attn.num_heads, dropout=attn.dropout_module.p, rope_base=rope_base)
        twin.load_state_dict(attn.state_dict())
        if rotary is not None:
            twin.rotary = rotary
        return twin

    def _position_qk(self, q, k, offset):
        return self.rotary(q, offset), self.rotary(k, offset)
