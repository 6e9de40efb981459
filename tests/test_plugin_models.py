"""posenc_fconv / posenc_transformer against stock fairseq models built in the same process."""

import math

import pytest
import torch

from fairseq_helpers import PAD, DummyTask, build, decoder_output, parse_args, random_batch
from posenc.kinds import BUILTIN_KINDS, find_kind, position_settings

FCONV_ARCHS = ["fconv", "fconv_iwslt_de_en", "fconv_wmt_en_ro", "fconv_wmt_en_de", "fconv_wmt_en_fr"]
TRANSFORMER_ARCHS = ["transformer", "transformer_iwslt_de_en", "transformer_wmt_en_de",
                     "transformer_vaswani_wmt_en_de_big"]
SMALL = {"fconv": "posenc_fconv_small", "transformer": "posenc_transformer_small"}
OUR_KEYS = {"arch", *position_settings()}
# The built-in kinds of each family (the registry may hold more, registered by other tests).
FAMILY_KINDS = {family: tuple(k for k in BUILTIN_KINDS if family in find_kind(k).families)
                for family in ("fconv", "transformer")}


def assert_loads_strictly_and_matches(stock, ours, task):
    ours.load_state_dict(stock.state_dict(), strict=True)
    src, src_lengths, prev = random_batch(task.source_dictionary)
    diff = (decoder_output(stock, src, src_lengths, prev) - decoder_output(ours, src, src_lengths, prev)).abs().max()
    assert diff.item() <= 1e-5


@pytest.mark.parametrize("arch", FCONV_ARCHS + TRANSFORMER_ARCHS)
def test_default_sizes_equal_the_stock_architecture(arch):
    stock, ours = vars(parse_args(arch)), vars(parse_args(f"posenc_{arch}"))
    assert {k: v for k, v in stock.items() if k not in OUR_KEYS} == {k: v for k, v in ours.items() if k not in OUR_KEYS}


@pytest.mark.slow
@pytest.mark.parametrize("arch", FCONV_ARCHS + TRANSFORMER_ARCHS)
def test_stock_checkpoint_loads_strictly_and_gives_the_same_outputs(arch):
    task = DummyTask()
    stock, _ = build(arch, task=task, seed=3)
    ours, args = build(f"posenc_{arch}", task=task, seed=3)
    # Same seed, same init: default flags build the stock model, not just a compatible one.
    assert all(torch.equal(a, b) for a, b in zip(stock.state_dict().values(), ours.state_dict().values()))
    assert_loads_strictly_and_matches(stock, ours, task)
    assert ours.max_positions() == stock.max_positions()
    expected = ("learned", "learned") if arch.startswith("fconv") else ("sinusoidal", "sinusoidal")
    assert (args.encoder_pos, args.decoder_pos) == expected


@pytest.mark.parametrize("stock_flags,kinds", [
    (["--encoder-learned-pos", "--decoder-learned-pos"], ["--encoder-pos", "learned", "--decoder-pos", "learned"]),
    (["--no-token-positional-embeddings"], ["--encoder-pos", "none", "--decoder-pos", "none"]),
    (["--encoder-learned-pos"], ["--encoder-pos", "learned", "--decoder-pos", "sinusoidal"]),
])
def test_explicit_kinds_equal_the_stock_flags(stock_flags, kinds):
    task = DummyTask()
    stock, _ = build("transformer_iwslt_de_en", *stock_flags, task=task)
    ours, _ = build("posenc_transformer_iwslt_de_en", *kinds, task=task)
    assert_loads_strictly_and_matches(stock, ours, task)


def test_explicit_kinds_win_over_the_stock_flags():
    _, args = build("posenc_transformer_small", "--no-token-positional-embeddings", "--encoder-pos", "rope")
    assert (args.encoder_pos, args.decoder_pos) == ("rope", "none")
    model, _ = build("posenc_transformer_small", "--encoder-learned-pos", "--encoder-pos", "sinusoidal")
    assert "encoder.embed_positions.weight" not in model.state_dict()


def position_keys(model):
    return {k for k in model.state_dict() if "embed_positions" in k}


@pytest.mark.parametrize("family", ["fconv", "transformer"])
def test_a_side_set_to_none_loses_exactly_its_position_table(family):
    learned, _ = build(SMALL[family], "--encoder-pos", "learned", "--decoder-pos", "learned")
    everything = set(learned.state_dict())
    assert position_keys(learned) == {"encoder.embed_positions.weight", "decoder.embed_positions.weight"}
    for enc, dec in [("none", "learned"), ("learned", "none"), ("none", "none")]:
        model, _ = build(SMALL[family], "--encoder-pos", enc, "--decoder-pos", dec)
        lost = everything - set(model.state_dict())
        sides = (("encoder", enc), ("decoder", dec))
        assert lost == {f"{side}.embed_positions.weight" for side, kind in sides if kind == "none"}


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_fconv_none_removes_the_signal_from_convolutions_and_attention(side):
    """``none`` behaves exactly like a learned table of zeros: positions reach fconv only through
    the table, in both the convolution input and the attention term (e_j / g_i)."""
    task = DummyTask()
    other = "decoder" if side == "encoder" else "encoder"
    none_model, _ = build("posenc_fconv_small", f"--{side}-pos", "none", task=task)
    zeros_model, _ = build("posenc_fconv_small", task=task)
    state = dict(none_model.state_dict())
    key = f"{side}.embed_positions.weight"
    state[key] = torch.zeros_like(zeros_model.state_dict()[key])
    zeros_model.load_state_dict(state, strict=True)
    src, src_lengths, prev = random_batch(task.source_dictionary)
    assert torch.allclose(decoder_output(none_model, src, src_lengths, prev),
                          decoder_output(zeros_model, src, src_lengths, prev), atol=1e-6)
    # ...and that table is not inert: nonzero rows change the output.
    state[f"{side}.embed_positions.weight"] = torch.randn_like(state[f"{side}.embed_positions.weight"])
    zeros_model.load_state_dict(state)
    assert not torch.allclose(decoder_output(none_model, src, src_lengths, prev),
                              decoder_output(zeros_model, src, src_lengths, prev), atol=1e-4)
    assert f"{other}.embed_positions.weight" in none_model.state_dict()


@pytest.mark.parametrize("encoder_kind", FAMILY_KINDS["transformer"])
def test_transformer_encoder_without_positions_is_blind_to_source_order(encoder_kind):
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", encoder_kind, "--decoder-pos", "sinusoidal",
                     task=task)
    src, src_lengths, prev = random_batch(task.source_dictionary, pad_source=False, src_len=9)
    permuted = src[:, torch.randperm(src.size(1), generator=torch.Generator().manual_seed(0))]
    same = torch.allclose(decoder_output(model, src, src_lengths, prev),
                          decoder_output(model, permuted, src_lengths, prev), atol=1e-5)
    assert same == (encoder_kind == "none")


def test_rope_adds_no_parameters():
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none")
    rope, _ = build("posenc_transformer_small", "--encoder-pos", "rope", "--decoder-pos", "rope")
    assert none.state_dict().keys() == rope.state_dict().keys()
    assert sum(p.numel() for p in none.parameters()) == sum(p.numel() for p in rope.parameters())
    assert all(type(layer.self_attn).__name__ == "PositionalSelfAttention" for layer in rope.encoder.layers)
    assert all(type(layer.encoder_attn).__name__ == "MultiheadAttention" for layer in rope.decoder.layers)


def test_rope_side_is_position_aware_through_attention_only():
    task = DummyTask()
    rope, _ = build("posenc_transformer_small", "--encoder-pos", "rope", "--decoder-pos", "none", task=task)
    assert rope.encoder.embed_positions is None and rope.decoder.embed_positions is None
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none", task=task)
    none.load_state_dict(rope.state_dict())
    src, src_lengths, prev = random_batch(task.source_dictionary)
    rotated, unrotated = decoder_output(rope, src, src_lengths, prev), decoder_output(none, src, src_lengths, prev)
    assert not torch.allclose(rotated, unrotated, atol=1e-4)


@pytest.mark.parametrize("kind", ["alibi", "t5"])
def test_attention_bias_kinds_add_nothing_to_embeddings_and_keep_cross_attention_stock(kind):
    model, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind)
    for side in (model.encoder, model.decoder):
        assert side.embed_positions is None
        assert all(layer.self_attn.shared_bias is side.relative_attention_bias for layer in side.layers)
    assert not model.encoder.relative_attention_bias.causal and model.decoder.relative_attention_bias.causal
    assert all(type(layer.encoder_attn).__name__ == "MultiheadAttention" for layer in model.decoder.layers)
    # Only the side that asks for it gets it; the other keeps stock self-attention.
    mixed, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", "sinusoidal")
    assert all(type(layer.self_attn).__name__ == "MultiheadAttention" for layer in mixed.decoder.layers)
    assert not hasattr(mixed.decoder, "relative_attention_bias")


def test_alibi_adds_no_parameters_and_t5_one_table_per_side():
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none")
    alibi, _ = build("posenc_transformer_small", "--encoder-pos", "alibi", "--decoder-pos", "alibi")
    t5, args = build("posenc_transformer_small", "--encoder-pos", "t5", "--decoder-pos", "t5")
    assert alibi.state_dict().keys() == none.state_dict().keys()
    n_params = [sum(p.numel() for p in m.parameters()) for m in (none, alibi, t5)]
    heads = args.encoder_attention_heads
    # T5 shares one (32 buckets x heads) table across the layers of a side, as in T5: it appears
    # once in the state dict and once among the parameters, though every layer uses it.
    assert set(t5.state_dict()) - set(none.state_dict()) == {"encoder.relative_attention_bias.weight",
                                                              "decoder.relative_attention_bias.weight"}
    assert t5.state_dict()["encoder.relative_attention_bias.weight"].shape == (32, heads)
    assert n_params == [n_params[0], n_params[0], n_params[0] + 2 * 32 * heads]
    none.load_state_dict({k: v for k, v in t5.state_dict().items() if "relative_attention_bias" not in k})
    # Every layer's gradient reaches the one shared table.
    t5.train()
    task = DummyTask()
    src, src_lengths, prev = random_batch(task.source_dictionary)
    t5(src, src_lengths, prev)[0].sum().backward()
    assert t5.encoder.relative_attention_bias.weight.grad is not None
    assert t5.decoder.relative_attention_bias.weight.grad is not None


@pytest.mark.parametrize("kind", ["alibi", "t5"])
def test_bias_is_computed_once_per_side_and_length(kind, monkeypatch):
    """All layers of a side share one forward's lengths: the bias (ALiBi) or the bucket indices
    (T5) are computed once per side, not once per layer."""
    from posenc.encodings import attention_bias
    made = []
    if kind == "alibi":
        original = attention_bias.AlibiBias._make
        monkeypatch.setattr(attention_bias.AlibiBias, "_make", lambda self, *a: made.append(a) or original(self, *a))
    else:
        original = attention_bias.relative_position_bucket
        monkeypatch.setattr(attention_bias, "relative_position_bucket", lambda *a: made.append(a) or original(*a))
    task = DummyTask()
    model, args = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    assert args.encoder_layers == args.decoder_layers == 3
    src, src_lengths, prev = random_batch(task.source_dictionary)
    decoder_output(model, src, src_lengths, prev)
    assert len(made) == 2  # one for the encoder, one for the decoder


def encoder_out(model, src, src_lengths):
    with torch.no_grad():
        return model.encoder(src, src_lengths)["encoder_out"][0]  # (T, B, C)


@pytest.mark.parametrize("kind", FAMILY_KINDS["transformer"])
def test_encoder_output_of_a_sentence_does_not_change_when_left_padded(kind):
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", "none", task=task)
    src, _, _ = random_batch(task.source_dictionary, bsz=2, src_len=9, pad_source=False)
    sentence = src[:1, 4:]  # 5 tokens alone, then the same 5 tokens left-padded beside a 9-token one
    padded = src.clone()
    padded[0, :4] = PAD
    alone = encoder_out(model, sentence, torch.tensor([5]))[:, 0]
    in_batch = encoder_out(model, padded, padded.ne(PAD).sum(1))[4:, 0]
    assert torch.allclose(alone, in_batch, atol=1e-5)


def incremental_outputs(model, src, src_lengths, prev):
    """Decoder outputs step by step through fairseq's incremental state, ``(B, T, V)``."""
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)[0] for t in range(prev.size(1))]
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("family,kind", [(f, k) for f, kinds in FAMILY_KINDS.items() for k in kinds])
def test_incremental_decoding_equals_full_sequence_decoding(family, kind):
    task = DummyTask()
    model, _ = build(SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    src, src_lengths, prev = random_batch(task.source_dictionary, bsz=2, tgt_len=6)
    prev[-1, -1] = task.source_dictionary.index("w3")  # no padding inside a decoded prefix
    full = decoder_output(model, src, src_lengths, prev)
    assert torch.allclose(incremental_outputs(model, src, src_lengths, prev), full, atol=1e-4)


@pytest.mark.parametrize("kind", FAMILY_KINDS["transformer"])
def test_beam_reordering_of_the_incremental_state(kind):
    """Decode two steps of three hypotheses, reorder the cached self-attention state as beam search
    does, decode a third: the same as decoding the reordered prefixes from scratch. (The hypotheses
    share one source, as beams do; fairseq reorders the cross-attention cache on its own terms.)"""
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    src, src_lengths, prev = random_batch(task.source_dictionary, bsz=3, tgt_len=3)
    src, src_lengths = src[1:2].expand(3, -1), src_lengths[1:2].expand(3)
    prev[-1, -1] = task.source_dictionary.index("w3")
    order = torch.tensor([2, 0, 0])
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        for t in range(2):
            model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, order)
        step = model.decoder(prev[order], encoder_out, incremental_state=state)[0]
    full = decoder_output(model, src, src_lengths, prev[order])[:, -1:]
    unordered = decoder_output(model, src, src_lengths, prev)[:, -1:]
    assert not torch.allclose(full, unordered, atol=1e-3)  # the reordering is visible
    assert torch.allclose(step, full, atol=1e-4)


@pytest.mark.parametrize("kind", ["alibi", "t5"])
def test_attention_bias_kinds_run_past_every_table_length(kind):
    """No table bounds them: a 1500-token source (beyond the 1024 of max_positions) still encodes,
    and a token's output depends on its neighbours' distance."""
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    src = torch.randint(task.source_dictionary.nspecial, len(task.source_dictionary), (1, 1500),
                        generator=torch.Generator().manual_seed(0))
    out = encoder_out(model, src, torch.tensor([1500]))
    assert out.shape[0] == 1500 and torch.isfinite(out).all()


@pytest.mark.parametrize("family", ["fconv", "transformer"])
@pytest.mark.parametrize("max_pos", [None, "60"])
def test_every_placement_reports_the_stock_learned_max_positions(family, max_pos):
    extra = ["--max-source-positions", max_pos, "--max-target-positions", max_pos] if max_pos else []
    # The limit depends on the length arguments only, so small models stand in for big ones.
    stock_arch = "fconv_iwslt_de_en" if family == "fconv" else "transformer_iwslt_de_en"
    learned_flags = [] if family == "fconv" else ["--encoder-learned-pos", "--decoder-learned-pos"]
    stock, _ = build(stock_arch, *learned_flags, *extra)
    kinds = FAMILY_KINDS[family]
    # Each kind on each side, alone and on both: the limit of a side depends on its own kind only.
    pairs = dict.fromkeys([(k, k) for k in kinds] + [(k, "none") for k in kinds] + [("none", k) for k in kinds])
    for enc, dec in pairs:
        model, _ = build(SMALL[family], "--encoder-pos", enc, "--decoder-pos", dec, *extra)
        assert model.max_positions() == stock.max_positions(), (enc, dec)


@pytest.mark.parametrize("family", ["fconv", "transformer"])
def test_cells_share_their_non_position_initialisation(family):
    """Position modules are swapped in without advancing the RNG: same seed, same other weights."""
    reference, _ = build(SMALL[family], "--encoder-pos", "none", "--decoder-pos", "none", seed=7)
    for kind in FAMILY_KINDS[family]:
        model, _ = build(SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind, seed=7)
        for name, tensor in reference.state_dict().items():
            assert torch.equal(tensor, model.state_dict()[name]), (kind, name)


def test_fresh_tables_differ_between_sides():
    model, _ = build("posenc_transformer_small", "--encoder-pos", "learned", "--decoder-pos", "learned")
    assert not torch.equal(model.encoder.embed_positions.weight, model.decoder.embed_positions.weight)


def test_fconv_sinusoid_is_scaled_to_the_learned_table_norm():
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal")
    learned, _ = build("posenc_fconv_small")
    tokens = torch.full((1, 50), 5)
    sin_norm = model.encoder.embed_positions(tokens).norm(dim=-1).mean().item()
    learned_norm = learned.encoder.embed_positions(tokens).norm(dim=-1).mean().item()
    assert sin_norm == pytest.approx(learned_norm, rel=0.1)
    scaled, _ = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", "--sinusoidal-scale", "1.0")
    dim = args.encoder_embed_dim
    norm = scaled.encoder.embed_positions(tokens).norm(dim=-1).mean().item()
    assert norm == pytest.approx((dim / 2) ** 0.5, rel=1e-4)


def test_build_refuses_rope_for_fconv_in_process():
    args = parse_args("posenc_fconv_small")
    args.encoder_pos = "rope"
    from posenc.fairseq_plugin.fconv import PosencFConvModel
    with pytest.raises(ValueError, match="allowed: learned, sinusoidal, none"):
        PosencFConvModel.build_model(args, DummyTask())


@pytest.mark.parametrize("arch,scale", [("posenc_fconv_small", 0.1 * 2 ** 0.5), ("posenc_transformer_small", 1.0)])
def test_args_record_every_resolved_position_setting(arch, scale):
    """fairseq saves the args in the checkpoint: every unset position flag is resolved in them."""
    args = parse_args(arch)
    assert (args.sinusoidal_variant, args.sinusoidal_base) == ("fairseq", 10000.0)
    # Each family records the options of the kinds it serves: fconv has no RoPE, the Transformer has.
    assert getattr(args, "rope_base", None) == (10000.0 if "transformer" in arch else None)
    assert args.sinusoidal_scale == pytest.approx(scale, rel=1e-15)
    args = parse_args(arch, "--sinusoidal-scale", "0.5", "--sinusoidal-base", "500", "--sinusoidal-variant", "paper")
    assert (args.sinusoidal_scale, args.sinusoidal_base, args.sinusoidal_variant) == (0.5, 500.0, "paper")


def test_sinusoidal_base_reaches_the_model():
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", "--sinusoidal-base", "100",
                        "--sinusoidal-variant", "paper", "--sinusoidal-scale", "1")
    rows = model.encoder.embed_positions(torch.full((1, 30), 5))[0].double()
    d = args.encoder_embed_dim
    for p in (0, 7, 29):
        for i in (0, 5, d // 2 - 1):
            angle = (p + PAD + 1) / 100 ** (2 * i / d)  # the first token sits at padding_idx + 1
            assert rows[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert rows[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("flag", ["--sinusoidal-base", "--rope-base"])
@pytest.mark.parametrize("value", ["1", "0.5", "-3", "inf"])
def test_a_base_not_above_one_is_refused_by_argparse(flag, value, capsys):
    with pytest.raises(SystemExit):
        parse_args("posenc_transformer_small", flag, value)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err and "greater than 1" in err
