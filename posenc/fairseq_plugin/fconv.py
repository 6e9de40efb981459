"""``posenc_fconv``: fairseq's ConvS2S with a per-side choice of position signal.

Both places where ConvS2S uses its position-added embeddings read ``embed_positions``: the
convolution input and the attention term built from the embeddings (e_j in the encoder output
``(x + input_embedding)``, g_i in the decoder's ``target_embedding``). Swapping the module
therefore changes, or with ``none`` removes, the position signal in both at once.
"""

from functools import partial

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model, register_model_architecture
from fairseq.models.fconv import FConvModel

from posenc.encodings.defaults import usable_positions
from posenc.fairseq_plugin.options import add_position_args, check_kinds, fill_position_defaults, register_stock_twins
from posenc.fairseq_plugin.swap import build_without_touching_rng
from posenc.kinds import Side, kind_names, position_kind

STOCK_FCONV_ARCHS = ("fconv", "fconv_iwslt_de_en", "fconv_wmt_en_ro", "fconv_wmt_en_de", "fconv_wmt_en_fr")


def fconv_side(side, stock_table, max_positions_arg, args) -> Side:
    """What a kind's builder gets for one fconv side: the stock table's width and padding row, and
    the stock learned ``max_positions`` to report."""
    padding_idx = stock_table.padding_idx
    return Side("fconv", side, stock_table.embedding_dim, padding_idx, max_positions_arg,
                usable_positions("fconv", max_positions_arg, padding_idx), stock_table=stock_table, args=args)


@register_model("posenc_fconv")
class PosencFConvModel(FConvModel):
    """Stock ``fconv`` built as fairseq builds it, then each side's positions swapped in. The kinds
    it can do are the registry's for fconv (``posenc.kinds``): kinds added to the embeddings."""

    @staticmethod
    def add_args(parser):
        FConvModel.add_args(parser)
        add_position_args(parser, "fconv")

    @classmethod
    def build_model(cls, args, task):
        fill_fconv_position_defaults(args)
        check_kinds("posenc_fconv", args, kind_names("fconv"))
        stock = FConvModel.build_model(args, task)
        for side, module, max_arg in (("encoder", stock.encoder, args.max_source_positions),
                                      ("decoder", stock.decoder, args.max_target_positions)):
            kind = position_kind(getattr(args, f"{side}_pos"))
            built = build_without_touching_rng(partial(kind.build, fconv_side(side, module.embed_positions, max_arg,
                                                                              args)), side)
            if built is None:  # fconv adds embed_positions(tokens) on every side
                raise ValueError(f"posenc_fconv: position kind {kind.name!r} built no module for the {side}; fconv "
                                 "needs one on every side (a zero term for no positions, as none builds)")
            module.embed_positions = built
        return cls(stock.encoder, stock.decoder)


def fill_fconv_position_defaults(args):
    fill_position_defaults(args, "learned", "learned", family="fconv")


register_stock_twins("posenc_fconv", STOCK_FCONV_ARCHS, fill_fconv_position_defaults)


@register_model_architecture("posenc_fconv", "posenc_fconv_table4")
def posenc_fconv_table4(args):
    """The ablation model of Gehring et al. (2017), sec. 5.4 / Table 4: 13 encoder layers of
    kernel width 3, 5 decoder layers of kernel width 5, 512 for embeddings, hidden layers and
    the decoder output embedding."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 512)
    args.encoder_layers = getattr(args, "encoder_layers", "[(512, 3)] * 13")
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 512)
    args.decoder_layers = getattr(args, "decoder_layers", "[(512, 5)] * 5")
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", 512)
    ARCH_CONFIG_REGISTRY["fconv"](args)
    fill_fconv_position_defaults(args)


@register_model_architecture("posenc_fconv", "posenc_fconv_small")
def posenc_fconv_small(args):
    """Sized to learn the synthetic task in well under a minute per cell on 2 CPU cores: the
    Table 4 shape (a deeper encoder of kernel width 3, a shallower decoder of width 5) at 1/8
    the width."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 64)
    args.encoder_layers = getattr(args, "encoder_layers", "[(64, 3)] * 6")
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 64)
    args.decoder_layers = getattr(args, "decoder_layers", "[(64, 5)] * 3")
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", 64)
    args.dropout = getattr(args, "dropout", 0.1)
    ARCH_CONFIG_REGISTRY["fconv"](args)
    fill_fconv_position_defaults(args)
