"""The per-side position flags shared by both model families."""

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model_architecture

from posenc.kinds import KINDS
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS


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
                        help="sinusoid layout: fairseq's concatenated halves (default) or the paper's interleaved pairs")
    parser.add_argument("--sinusoidal-scale", type=float, default=None,
                        help="multiplier of the sinusoid table (default: 1 for the transformer; for fconv the "
                             "learned table's initial norm over the sinusoid's norm, 0.1*sqrt(2))")
    if "rope" in kinds:
        parser.add_argument("--rope-base", type=float, default=None,
                            help="RoPE base of the rotation frequencies (default 10000)")


def fill_position_defaults(args, stock_encoder_kind: str, stock_decoder_kind: str):
    """Resolve the flags in place, so checkpoints record the kinds actually used."""
    args.encoder_pos = getattr(args, "encoder_pos", None) or stock_encoder_kind
    args.decoder_pos = getattr(args, "decoder_pos", None) or stock_decoder_kind
    args.sinusoidal_variant = getattr(args, "sinusoidal_variant", None) or "fairseq"
    args.sinusoidal_scale = getattr(args, "sinusoidal_scale", None)
    args.rope_base = getattr(args, "rope_base", None) or 10000.0


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
