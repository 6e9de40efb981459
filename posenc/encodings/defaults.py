"""What each position setting is when its flag is unset.

The one home of these numbers: the plugin resolves unset flags with them (and writes the resolved
values into the model's args, so checkpoints record them), and the analysis falls back on them
for checkpoints written before the values were recorded. Plain numbers, no torch or fairseq.
"""

import math

SINUSOID_BASE = 10000.0      # Vaswani et al. (2017): wavelengths 2*pi .. 2*pi*10000
SINUSOID_VARIANT = "fairseq"  # the stock models' layout (concatenated sin and cos halves)
ROPE_BASE = 10000.0          # RoFormer's base of the rotation frequencies
FCONV_INIT_STD = 0.1          # fconv draws token and learned position rows from N(0, 0.1)


def default_sinusoidal_scale(family: str) -> float:
    """The multiplier a family's sinusoid table gets when ``--sinusoidal-scale`` is unset.

    Transformer: 1 (the scaled token embeddings have norm ~sqrt(D), the sinusoid sqrt(D/2)).
    fconv: the learned table's initial row norm over the sinusoid's, 0.1*sqrt(D) / sqrt(D/2)
    = 0.1*sqrt(2) at every width D. fconv neither scales its tokens nor normalises, so an unscaled
    sinusoid would be ~7x the size of the N(0, 0.1) token rows it is added to.
    """
    if family == "fconv":
        return FCONV_INIT_STD * math.sqrt(2.0)
    if family == "transformer":
        return 1.0
    raise ValueError(f"no default sinusoid scale for model family {family!r}; allowed: fconv, transformer")


def stock_position_kinds(args):
    """``(encoder kind, decoder kind)`` the stock Transformer flags ask for: sinusoidal, learned per
    side under ``--encoder-learned-pos`` / ``--decoder-learned-pos``, none on both sides under
    ``--no-token-positional-embeddings``. ``args``: a Namespace or a dict."""
    get = args.get if isinstance(args, dict) else (lambda name: getattr(args, name, None))
    if get("no_token_positional_embeddings"):
        return "none", "none"
    return ("learned" if get("encoder_learned_pos") else "sinusoidal",
            "learned" if get("decoder_learned_pos") else "sinusoidal")


def usable_positions(family: str, max_positions_arg: int, padding_idx: int) -> int:
    """How many positions a side serves, from its ``--max-source/target-positions``: fconv's
    argument counts the table's rows, the padding row and the unused one before it included; the
    Transformer's counts positions."""
    return max_positions_arg - padding_idx - 1 if family == "fconv" else max_positions_arg


__all__ = ["FCONV_INIT_STD", "ROPE_BASE", "SINUSOID_BASE", "SINUSOID_VARIANT", "default_sinusoidal_scale",
           "stock_position_kinds", "usable_positions"]
