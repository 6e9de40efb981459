"""Position encodings in plain torch (no fairseq import).

Shapes follow fairseq: token batches are ``(B, T)`` LongTensors, position terms are ``(B, T, D)``.
Positions follow fairseq's convention: the first real token is at ``padding_idx + 1`` and pad
tokens get position ``padding_idx`` (a zero row).
"""

from posenc.encodings.attention_bias import (
    T5_MAX_DISTANCE,
    T5_NUM_BUCKETS,
    AlibiBias,
    T5RelativeBias,
    alibi_slopes,
    relative_position_bucket,
)
from posenc.encodings.learned import LearnedPositionalEmbedding, fconv_learned_positions, transformer_learned_positions
from posenc.encodings.none import NoPositionalEmbedding
from posenc.encodings.positions import make_positions, relative_positions
from posenc.encodings.rotary import RotaryEmbedding
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, SinusoidalPositionalEmbedding, sinusoid_table
from posenc.kinds import KINDS  # re-exported; the one home is posenc.kinds

__all__ = [
    "AlibiBias",
    "KINDS",
    "LearnedPositionalEmbedding",
    "NoPositionalEmbedding",
    "RotaryEmbedding",
    "SINUSOID_VARIANTS",
    "SinusoidalPositionalEmbedding",
    "T5RelativeBias",
    "T5_MAX_DISTANCE",
    "T5_NUM_BUCKETS",
    "alibi_slopes",
    "fconv_learned_positions",
    "make_positions",
    "relative_position_bucket",
    "relative_positions",
    "sinusoid_table",
    "transformer_learned_positions",
]
