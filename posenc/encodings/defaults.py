"""What each position setting is when its flag is unset.

The one home of these numbers: the plugin resolves unset flags with them (and writes the resolved
values into the model's args, so checkpoints record them), and the analysis falls back on them
for checkpoints written before the values were recorded. Plain numbers, no torch or fairseq.
"""

import math

SINUSOID_BASE = 10000.0      # Vaswani et al. (2017): wavelengths 2*pi .. 2*pi*10000
SINUSOID_VARIANT = "fairseq"  # the stock models' layout (concatenated sin and cos halves)
SINUSOID_VARIANTS = ("paper", "fairseq")  # Vaswani et al.'s interleaved pairs; fairseq's concatenated halves
ROPE_BASE = 10000.0          # RoFormer's base of the rotation frequencies
FCONV_INIT_STD = 0.1          # fconv draws token and learned position rows from N(0, 0.1)
# Shaw et al. (2018) sec. 3.2 clip distances at k (eq. 5-6); 16 is the default issue 31 asks for
# (the paper's experiments use k = 16 and report little change for k >= 2; quoted from memory, not
# re-checked here).
SHAW_MAX_DISTANCE = 16
# Whose relative vectors: one set per layer shared by its heads (the paper's sec. 3.3, and
# tensor2tensor's dot_product_attention_relative, checked: one [2k+1, depth] table per layer), or
# one per layer and head (what the paper's sec. 4.1 says its base model used, as issue 40 quotes it).
SHAW_HEADS = ("shared", "per_head")
# SHAPE (Kiyono et al. 2021), as the authors' code runs it (butsugiri/shape, checked:
# onmt/modules/embeddings.py draws k with torch.randint(0, K), so from 0..K-1, and at validation and
# inference takes the rows from position K on): K = 40 is one of their configs' pe_noise_size
# (config_shape/: 10, 20, 30, 40, 100 and 500, each for WMT'16 and for its 1-50 length split);
# --shape-max-shift sets another, --shape-eval-offset the inference offset (default K).
SHAPE_MAX_SHIFT = 40
# CAPE (Likhomanenko et al. 2021): training-time global shift Delta ~ U[-a, a], local shift
# epsilon_i ~ U[-b, b] and global scaling log lambda ~ U[-log c, log c] of continuous positions.
# gcambara/cape's CAPE1d defaults are a = b = 0, c = 1 (no augmentation at all); the values below
# are the CAPE authors' "CAPE for text" example in gcambara/cape's README (checked: max_global_shift
# 5.0, max_local_shift 0.5, max_global_scaling 1.03, normalize=False). The paper's own MT settings
# were not checked here: flags set others.
CAPE_MAX_GLOBAL_SHIFT = 5.0
CAPE_MAX_LOCAL_SHIFT = 0.5
CAPE_MAX_GLOBAL_SCALING = 1.03


def check_base(base: float) -> float:
    """A base must be a finite number above 1 (at 1 every pair has the same frequency; below 1
    the frequencies exceed 1 rad per position and alias)."""
    base = float(base)
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"sinusoid base must be a finite number greater than 1, got {base:g}")
    return base


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


__all__ = ["CAPE_MAX_GLOBAL_SCALING", "CAPE_MAX_GLOBAL_SHIFT", "CAPE_MAX_LOCAL_SHIFT", "FCONV_INIT_STD", "ROPE_BASE",
           "SHAPE_MAX_SHIFT", "SHAW_HEADS", "SHAW_MAX_DISTANCE", "SINUSOID_BASE", "SINUSOID_VARIANT",
           "SINUSOID_VARIANTS",
           "check_base", "default_sinusoidal_scale", "stock_position_kinds", "usable_positions"]
