"""The per-side position flags shared by both model families."""

import argparse

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model_architecture

from posenc.encodings.defaults import ROPE_BASE, SINUSOID_BASE, SINUSOID_VARIANT, default_sinusoidal_scale
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, check_base
from posenc.kinds import KINDS

# The position settings fill_position_defaults resolves into the args (so checkpoints record them):
# everything in which a posenc architecture's resolved args may differ from the stock one's.
POSITION_SETTINGS = ("encoder_pos", "decoder_pos", "sinusoidal_variant", "sinusoidal_scale", "sinusoidal_base",
                     "rope_base")


def _base(text: str) -> float:
    """argparse ``type`` of a base: a number above 1, else argparse's one-line error."""
    try:
        return check_base(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_position_args(parser, allowed_kinds=KINDS):
    """``--encoder-pos`` / ``--decoder-pos`` and the knobs of the kinds.

    ``allowed_kinds`` becomes argparse ``choices``: a kind the model cannot do is refused at
    start-up with argparse's one-line error, which names the allowed kinds.
    """
    kinds = list(allowed_kinds)
    parser.add_argument("--encoder-pos", choices=kinds, default=None,
                        help="position signal of the encoder (source side); unset: the stock model's")
    parser.add_argument("--decoder-pos", choices=kinds, default=None,
                        help="position signal of the decoder (target side); unset: the stock model's")
    parser.add_argument("--sinusoidal-variant", choices=list(SINUSOID_VARIANTS), default=None,
                        help="sinusoid layout: fairseq's concatenated halves (default) or the paper's "
                             "interleaved pairs")
    parser.add_argument("--sinusoidal-scale", type=float, default=None,
                        help="multiplier of the sinusoid table (default: 1 for the transformer; for fconv the "
                             "learned table's initial norm over the sinusoid's norm, 0.1*sqrt(2))")
    parser.add_argument("--sinusoidal-base", type=_base, default=None,
                        help=f"base b of the sinusoid's wavelengths 2*pi .. ~2*pi*b (default {SINUSOID_BASE:g})")
    if "rope" in kinds:
        parser.add_argument("--rope-base", type=_base, default=None,
                            help=f"RoPE base of the rotation frequencies (default {ROPE_BASE:g})")


def _resolved(args, name, default):
    value = getattr(args, name, None)
    return default if value is None else value


def fill_position_defaults(args, stock_encoder_kind: str, stock_decoder_kind: str, family: str):
    """Resolve every position flag in place (kinds, sinusoid variant, scale and base, RoPE
    base): the args are what fairseq saves, so a checkpoint records the values the model used,
    and the analysis rebuilds its closed-form tables from them."""
    args.encoder_pos = getattr(args, "encoder_pos", None) or stock_encoder_kind
    args.decoder_pos = getattr(args, "decoder_pos", None) or stock_decoder_kind
    args.sinusoidal_variant = getattr(args, "sinusoidal_variant", None) or SINUSOID_VARIANT
    args.sinusoidal_scale = float(_resolved(args, "sinusoidal_scale", default_sinusoidal_scale(family)))
    args.sinusoidal_base = float(_resolved(args, "sinusoidal_base", SINUSOID_BASE))
    args.rope_base = float(_resolved(args, "rope_base", ROPE_BASE))


def check_kinds(model_name: str, args, allowed_kinds):
    """The in-process twin of argparse's ``choices`` check (models built from code or configs)."""
    for flag, kind in (("--encoder-pos", args.encoder_pos), ("--decoder-pos", args.decoder_pos)):
        if kind not in allowed_kinds:
            raise ValueError(f"{model_name}: {flag} {kind!r} is not supported; allowed: {', '.join(allowed_kinds)}")


def register_stock_twins(model_name: str, stock_names, fill_defaults):
    """``posenc_<stock>`` for each stock architecture: the stock function fills its defaults
    (so sizes equal the stock ones), then ``fill_defaults`` resolves the position flags."""
    for name in stock_names:
        stock_arch = ARCH_CONFIG_REGISTRY[name]

        def architecture(args, stock_arch=stock_arch):
            stock_arch(args)
            fill_defaults(args)

        architecture.__doc__ = f"``{name}``'s defaults, positions as stock unless set."
        register_model_architecture(model_name, f"posenc_{name}")(architecture)
