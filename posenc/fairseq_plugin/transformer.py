"""``posenc_transformer``: fairseq's Transformer with a per-side choice of position signal.

``learned`` and ``sinusoidal`` are added to the scaled token embeddings as in the stock model;
``rope``, ``alibi`` and ``t5`` add nothing there and act in that side's self-attention (encoder
self-attention for the source side, decoder self-attention for the target side): ``rope`` rotates
queries and keys, ``alibi`` and ``t5`` add a relative bias to the logits, from one bias module
owned by the side and shared by its layers; ``none`` leaves the side without any position
signal. Cross-attention never gets one: source and target positions do not share a coordinate
system.
"""

from functools import partial

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model, register_model_architecture
from fairseq.models.transformer import TransformerModel

from posenc.encodings import AlibiBias, SinusoidalPositionalEmbedding, T5RelativeBias, transformer_learned_positions
from posenc.encodings.attention_bias import is_causal, t5_init_std
from posenc.encodings.defaults import stock_position_kinds
from posenc.fairseq_plugin.bias_attention import BiasedMultiheadAttention
from posenc.fairseq_plugin.options import add_position_args, check_kinds, fill_position_defaults, register_stock_twins
from posenc.fairseq_plugin.rotary_attention import RotaryMultiheadAttention
from posenc.fairseq_plugin.swap import build_without_touching_rng, copy_learned_init
from posenc.kinds import ATTENTION_BIAS_KINDS, FAMILY_KINDS, SELF_ATTENTION_KINDS

TRANSFORMER_KINDS = FAMILY_KINDS["transformer"]
STOCK_TRANSFORMER_ARCHS = ("transformer", "transformer_iwslt_de_en", "transformer_wmt_en_de",
                           "transformer_vaswani_wmt_en_de_big")


def fill_transformer_position_defaults(args):
    fill_position_defaults(args, *stock_position_kinds(args), family="transformer")


def transformer_positions(kind, stock_table, embed_dim, padding_idx, max_positions_arg, args):
    """The additive position module of one side (None for the self-attention kinds and ``none``)."""
    if kind == "learned":
        return copy_learned_init(transformer_learned_positions(max_positions_arg, embed_dim, padding_idx), stock_table)
    if kind == "sinusoidal":  # scale and base resolved by fill_transformer_position_defaults
        return SinusoidalPositionalEmbedding(embed_dim, padding_idx, variant=args.sinusoidal_variant,
                                             init_size=max_positions_arg + padding_idx + 1,
                                             scale=args.sinusoidal_scale, base=args.sinusoidal_base)
    return None


def rotate_self_attention(layers, rope_base):
    for layer in layers:
        layer.self_attn = RotaryMultiheadAttention.from_attention(layer.self_attn, rope_base)


def attention_bias(kind, side, num_heads, embed_dim):
    """The side's shared bias module: bidirectional in the encoder, causal in the decoder."""
    causal = is_causal(side)
    if kind == "alibi":
        return AlibiBias(num_heads, causal)
    return T5RelativeBias(num_heads, causal, init_std=t5_init_std(embed_dim))


def bias_self_attention(side_module, kind, side, num_heads, embed_dim):
    """Give the side its one bias module and every layer's self-attention a reference to it."""
    side_module.relative_attention_bias = attention_bias(kind, side, num_heads, embed_dim)
    for layer in side_module.layers:
        layer.self_attn = BiasedMultiheadAttention.from_attention(layer.self_attn, side_module.relative_attention_bias,
                                                                  kind)


@register_model("posenc_transformer")
class PosencTransformerModel(TransformerModel):
    """Stock ``transformer`` built as fairseq builds it, then each side's positions swapped in."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_position_args(parser, allowed_kinds=TRANSFORMER_KINDS)

    @classmethod
    def build_model(cls, args, task):
        fill_transformer_position_defaults(args)
        check_kinds("posenc_transformer", args, TRANSFORMER_KINDS)
        in_attention = [k for k in (args.encoder_pos, args.decoder_pos) if k in SELF_ATTENTION_KINDS]
        if in_attention and getattr(args, "quant_noise_pq", 0):
            raise ValueError(f"posenc_transformer: {in_attention[0]} does not support --quant-noise-pq")
        model = super().build_model(args, task)
        sides = (("encoder", model.encoder, args.max_source_positions, args.encoder_embed_dim,
                  args.encoder_attention_heads),
                 ("decoder", model.decoder, args.max_target_positions, args.decoder_embed_dim,
                  args.decoder_attention_heads))
        for side, module, max_arg, dim, heads in sides:
            kind = getattr(args, f"{side}_pos")
            build = partial(transformer_positions, kind, module.embed_positions, dim, module.padding_idx, max_arg, args)
            module.embed_positions = build_without_touching_rng(build, side)
            if kind == "rope":
                build_without_touching_rng(partial(rotate_self_attention, module.layers, args.rope_base), side)
            elif kind in ATTENTION_BIAS_KINDS:
                build_without_touching_rng(partial(bias_self_attention, module, kind, side, heads, dim), side)
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
