"""Position encodings in plain torch (no fairseq import).

Shapes follow fairseq: token batches are ``(B, T)`` LongTensors, position terms are ``(B, T, D)``.
Positions follow fairseq's convention: the first real token is at ``padding_idx + 1`` and pad
tokens get position ``padding_idx`` (a zero row).

The names below are imported on first use (PEP 562), so ``posenc.encodings.defaults`` (plain
numbers, which the kinds' registry reads) can be imported without torch.
"""

import importlib

_HOMES = {
    "T5_MAX_DISTANCE": "attention_bias", "T5_NUM_BUCKETS": "attention_bias", "AlibiBias": "attention_bias",
    "T5RelativeBias": "attention_bias", "alibi_slopes": "attention_bias", "relative_position_bucket": "attention_bias",
    "LearnedPositionalEmbedding": "learned", "fconv_learned_positions": "learned",
    "transformer_learned_positions": "learned", "NoPositionalEmbedding": "none", "make_positions": "positions",
    "relative_positions": "positions", "RotaryEmbedding": "rotary", "SINUSOID_VARIANTS": "defaults",
    "SinusoidalPositionalEmbedding": "sinusoidal", "sinusoid_table": "sinusoidal",
    "ShawRelativePositions": "shaw", "ShiftedSinusoidalEmbedding": "shifted", "CapeEmbedding": "shifted",
}

__all__ = sorted(_HOMES)


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
