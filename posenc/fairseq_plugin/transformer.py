"""``posenc_transformer``: fairseq's Transformer with a per-side choice of position signal.

A kind that acts on the embeddings (``learned``, ``sinusoidal``, ``shape``, ``cape``) becomes the
side's ``embed_positions``, added to the scaled token embeddings as in the stock model; any other
adds nothing there and acts in that side's self-attention (encoder self-attention for the source
side, decoder self-attention for the target side), through the one ``PositionalSelfAttention``:
a rotation of queries and keys (``rope``), a term on the logits from one module owned by the side
and shared by its layers (``alibi``, ``t5``), or terms on the keys and values (``shaw``). ``none``
leaves the side without any position signal. Cross-attention never gets one: source and target
positions do not share a coordinate system.
"""

from functools import partial

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model, register_model_architecture
from fairseq.models.transformer import TransformerModel

from posenc.encodings.defaults import stock_position_kinds, usable_positions
from posenc.fairseq_plugin.options import add_position_args, check_kinds, fill_position_defaults, register_stock_twins
from posenc.fairseq_plugin.positional_attention import ATTENTION_TERMS, PositionalSelfAttention
from posenc.fairseq_plugin.swap import build_without_touching_rng
from posenc.kinds import EMBEDDINGS, LOGITS, Side, kind_names, position_kind

STOCK_TRANSFORMER_ARCHS = ("transformer", "transformer_iwslt_de_en", "transformer_wmt_en_de",
                           "transformer_vaswani_wmt_en_de_big")


def fill_transformer_position_defaults(args):
    fill_position_defaults(args, *stock_position_kinds(args), family="transformer")


def attend_with_positions(side_module, kind, side: Side):
    """Every layer's self-attention carries the kind's term: a logits term is one module the side
    owns (``relative_attention_bias``) and every layer references; the others are each layer's own."""
    if kind.acts == LOGITS:
        side_module.relative_attention_bias = kind.build(side)
    for layer in side_module.layers:
        term = side_module.relative_attention_bias if kind.acts == LOGITS else kind.build(side)
        layer.self_attn = PositionalSelfAttention.from_attention(layer.self_attn, kind.name,
                                                                 **{ATTENTION_TERMS[kind.acts]: term})


@register_model("posenc_transformer")
class PosencTransformerModel(TransformerModel):
    """Stock ``transformer`` built as fairseq builds it, then each side's positions swapped in. The
    kinds it can do are the registry's for the Transformer (``posenc.kinds``)."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_position_args(parser, "transformer")

    @classmethod
    def build_model(cls, args, task):
        fill_transformer_position_defaults(args)
        check_kinds("posenc_transformer", args, kind_names("transformer"))
        kinds = {side: position_kind(getattr(args, f"{side}_pos")) for side in ("encoder", "decoder")}
        in_attention = [k.name for k in kinds.values() if k.acts != EMBEDDINGS]
        if in_attention and getattr(args, "quant_noise_pq", 0):
            raise ValueError(f"posenc_transformer: {in_attention[0]} does not support --quant-noise-pq")
        model = super().build_model(args, task)
        sides = (("encoder", model.encoder, args.max_source_positions, args.encoder_embed_dim,
                  args.encoder_attention_heads),
                 ("decoder", model.decoder, args.max_target_positions, args.decoder_embed_dim,
                  args.decoder_attention_heads))
        for side, module, max_arg, dim, heads in sides:
            kind = kinds[side]
            where = Side("transformer", side, dim, module.padding_idx, max_arg,
                         usable_positions("transformer", max_arg, module.padding_idx), heads, module.embed_positions,
                         args)
            if kind.acts == EMBEDDINGS:
                module.embed_positions = build_without_touching_rng(partial(kind.build, where), side)
                continue
            module.embed_positions = None  # the kind acts in self-attention and adds nothing to the embeddings
            build_without_touching_rng(partial(attend_with_positions, module, kind, where), side)
        return model


register_stock_twins("posenc_transformer", STOCK_TRANSFORMER_ARCHS, fill_transformer_position_defaults)


@register_model_architecture("posenc_transformer", "posenc_transformer_small")
def posenc_transformer_small(args):
    """Sized to learn the synthetic task in about a minute per cell on 2 CPU cores."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 256)
    args.encoder_layers = getattr(args, "encoder_layers", 3)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.decoder_layers = getattr(args, "decoder_layers", 3)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 4)
    args.dropout = getattr(args, "dropout", 0.1)
    ARCH_CONFIG_REGISTRY["transformer"](args)
    fill_transformer_position_defaults(args)
