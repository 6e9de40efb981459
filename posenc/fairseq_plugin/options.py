"""The per-side position flags shared by both model families: ``--encoder-pos`` / ``--decoder-pos``
and each kind's own flags, made from the options dataclass of its registration (``posenc.kinds``)."""

import argparse

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model_architecture

from posenc.kinds import family_options, kind_names, option_default, option_parser, recorded_before
from posenc.kinds.file import ENV as KINDS_ENV


def _checked(name: str, parse):
    """argparse ``type`` from a field's check: its ValueError becomes argparse's one-line error."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{name}: {exc}") from None
    convert.__name__ = parse.__name__ if hasattr(parse, "__name__") else name
    return convert


def add_position_args(parser, family: str):
    """``--encoder-pos`` / ``--decoder-pos`` and the flags of every kind ``family`` serves, read from
    the registry when fairseq builds its parser.

    The family's kinds become argparse ``choices``: a kind the model cannot do is refused at
    start-up with argparse's one-line error, which names the allowed kinds. A flag left unset
    stays None until ``fill_position_defaults`` resolves it.
    """
    kinds = list(kind_names(family))
    parser.add_argument("--encoder-pos", choices=kinds, default=None,
                        help="position signal of the encoder (source side); unset: the stock model's")
    parser.add_argument("--decoder-pos", choices=kinds, default=None,
                        help="position signal of the decoder (target side); unset: the stock model's")
    for f in family_options(family):
        flag = "--" + f.name.replace("_", "-")
        extra = {"choices": list(f.metadata["choices"])} if "choices" in f.metadata else {}
        parse = option_parser(f)
        if parse is not None:
            extra["type"] = _checked(flag, parse)
        parser.add_argument(flag, default=None, help=f.metadata.get("help"), **extra)


def fill_position_defaults(args, stock_encoder_kind: str, stock_decoder_kind: str, family: str):
    """Resolve every position flag in place (the kinds, and each option of the family's kinds):
    the args are what fairseq saves, so a checkpoint records the values the model used, and the
    analysis rebuilds its closed-form tables from them. Arguments a checkpoint recorded before an
    option existed (``recorded_before``) get the value that meant, so an older model runs as
    trained (a SHAPE checkpoint of before ``shape_eval_offset`` decodes at offset 0)."""
    args.encoder_pos = getattr(args, "encoder_pos", None) or stock_encoder_kind
    args.decoder_pos = getattr(args, "decoder_pos", None) or stock_decoder_kind
    older = {f.name for f in family_options(family) if recorded_before(f, args)}  # a checkpoint's older args
    for f in family_options(family):
        if getattr(args, f.name, None) is None:
            setattr(args, f.name, f.metadata["recorded_before"] if f.name in older else option_default(f, family, args))
        parse = option_parser(f)
        if parse is not None:  # a value set from code or a config, not through argparse
            setattr(args, f.name, parse(getattr(args, f.name)))


def check_kinds(model_name: str, args, allowed_kinds):
    """The in-process twin of argparse's ``choices`` check (models built from code or configs)."""
    for flag, kind in (("--encoder-pos", args.encoder_pos), ("--decoder-pos", args.decoder_pos)):
        if kind not in allowed_kinds:
            raise ValueError(f"{model_name}: {flag} {kind!r} is not supported; allowed: {', '.join(allowed_kinds)} "
                             f"(a kind from your own file is known once {KINDS_ENV} names that file)")


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
