"""RoPE against independent references: float64 angles in a bf16 model, fairseq's own
MultiheadAttention with the rotation switched off, and independence from left padding."""

import math

import pytest
import torch
from fairseq.modules import MultiheadAttention

from fairseq_helpers import PAD, DummyTask, build
from posenc.encodings import RotaryEmbedding
from posenc.fairseq_plugin.positional_attention import PositionalSelfAttention


def reference_angles(positions: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """m * base^(-2i/d) in float64, written out from RoFormer eq. (15) without the module."""
    theta = torch.tensor([base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    return torch.arange(positions, dtype=torch.float64)[:, None] * theta[None, :]


def wrapped(diff: torch.Tensor) -> torch.Tensor:
    """An angle difference brought into [-pi, pi)."""
    return torch.remainder(diff + math.pi, 2 * math.pi) - math.pi


def rotary_modules(model):
    return [m for m in model.modules() if isinstance(m, RotaryEmbedding)]


def test_rope_angles_in_a_bf16_model_match_float64_up_to_4096():
    model, args = build("posenc_transformer_small", "--encoder-pos", "rope", "--decoder-pos", "rope")
    model = model.to(torch.bfloat16)  # what --bf16 does to the model
    rotaries = rotary_modules(model)
    assert len(rotaries) == 6 and model.state_dict().keys() == build(
        "posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none")[0].state_dict().keys()
    # the model runs in bf16, and a rotation past the first cache (1024) makes it grow
    layer = model.encoder.layers[0].self_attn
    x = torch.randn(2, layer.num_heads, 5, layer.head_dim).to(torch.bfloat16)
    rotated = rotaries[0].rotate(x, offset=4092)
    assert rotated.dtype == torch.bfloat16
    ref = reference_angles(4097, layer.head_dim, args.rope_base)
    for rotary in rotaries:
        cos, sin = rotary.cos_sin(4097)
        assert cos.dtype == sin.dtype == torch.float32
        angles = torch.atan2(sin[:4097].double(), cos[:4097].double())
        assert wrapped(angles - ref).abs().max().item() < 1e-6
    # the product is taken in float32 and rounded once: within half a bf16 step of the exact one
    c, s = ref[4092:].cos(), ref[4092:].sin()
    xd = x.double().unflatten(-1, (-1, 2))
    exact = torch.stack((xd[..., 0] * c - xd[..., 1] * s, xd[..., 0] * s + xd[..., 1] * c), -1).flatten(-2)
    assert torch.allclose(rotated.double(), exact, rtol=2 ** -8, atol=1e-6)


def test_half_precision_never_reaches_the_angles():
    rope = RotaryEmbedding(64)
    rope.half()
    cos, sin = rope.cos_sin(3000)  # grows after the cast
    assert cos.dtype == torch.float32
    angles = torch.atan2(sin.double(), cos.double())
    assert wrapped(angles - reference_angles(cos.size(0), 64)).abs().max().item() < 1e-6
    assert rope.state_dict() == {} and list(rope.buffers()) == []


# --- rotation switched off: the attention itself against fairseq's MultiheadAttention ----------------------


class NoRotation(RotaryEmbedding):
    """Every angle 0: the same cache, rotation and casts, with cos = 1 and sin = 0."""

    def frequencies(self):
        return torch.zeros(self.head_dim // 2, dtype=torch.float64)


EMBED, HEADS = 16, 4


def attention_pair(seed=0):
    torch.manual_seed(seed)
    stock = MultiheadAttention(EMBED, HEADS, self_attention=True)
    with torch.no_grad():  # nonzero biases, so a dropped bias would show
        for proj in (stock.q_proj, stock.k_proj, stock.v_proj, stock.out_proj):
            proj.bias.normal_()
    ours = PositionalSelfAttention.from_attention(stock, "rope", rotary=NoRotation(stock.head_dim))
    return stock.eval(), ours.eval()


def causal_mask(t):
    return torch.triu(torch.full((t, t), float("-inf")), 1)  # as fairseq's buffered_future_mask


def inputs(bsz=3, t=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, bsz, EMBED, generator=g)
    left_pad = torch.zeros(bsz, t, dtype=torch.bool)
    left_pad[0, :2] = True
    left_pad[2, :1] = True
    right_pad = torch.zeros(bsz, t, dtype=torch.bool)
    right_pad[1, -3:] = True
    return x, left_pad, right_pad


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("case", ["key_padding", "causal", "causal_and_padding", "plain"])
def test_unrotated_attention_equals_fairseq_multihead_attention(case, need_weights):
    stock, ours = attention_pair()
    x, left_pad, right_pad = inputs()
    kpm = {"key_padding": left_pad, "causal_and_padding": right_pad}.get(case)
    mask = causal_mask(x.size(0)) if case.startswith("causal") else None
    with torch.no_grad():
        want, want_w = stock(x, x, x, key_padding_mask=kpm, attn_mask=mask, need_weights=need_weights)
        got, got_w = ours(x, x, x, key_padding_mask=kpm, attn_mask=mask, need_weights=need_weights)
    assert torch.allclose(got, want, atol=1e-5)
    if need_weights:
        assert got_w.shape == want_w.shape and torch.allclose(got_w, want_w, atol=1e-6)
        if kpm is not None:  # padded keys get no weight at all
            assert got_w.masked_select(kpm[:, None, :].expand_as(got_w)).abs().max() == 0


def test_unrotated_head_weights_and_before_softmax_equal_fairseq():
    stock, ours = attention_pair()
    # fairseq's fused path (taken without incremental state) averages the heads even when asked
    # for each; its own explicit path, the one that honours need_head_weights, is the reference.
    stock._set_skip_embed_dim_check()
    x, left_pad, _ = inputs()
    with torch.no_grad():
        _, want = stock(x, x, x, key_padding_mask=left_pad, need_head_weights=True)
        _, got = ours(x, x, x, key_padding_mask=left_pad, need_head_weights=True)
        assert got.shape == want.shape == (HEADS, 3, 7, 7) and torch.allclose(got, want, atol=1e-6)
        want_scores, want_v = stock(x, x, x, attn_mask=causal_mask(7), before_softmax=True)
        got_scores, got_v = ours(x, x, x, attn_mask=causal_mask(7), before_softmax=True)
    assert torch.allclose(got_scores, want_scores, atol=1e-5) and torch.allclose(got_v, want_v, atol=1e-6)


def test_unrotated_incremental_decoding_and_beam_reordering_equal_fairseq():
    stock, ours = attention_pair(seed=3)
    x, _, _ = inputs(bsz=3, t=8, seed=2)
    stock_state, our_state = {}, {}
    reorder_after = {2: torch.tensor([2, 0, 0]), 5: torch.tensor([1, 1, 2])}
    with torch.no_grad():
        for t in range(x.size(0)):
            step = x[t : t + 1]
            want, _ = stock(step, step, step, incremental_state=stock_state, need_weights=False)
            got, _ = ours(step, step, step, incremental_state=our_state, need_weights=False)
            assert torch.allclose(got, want, atol=1e-5), t
            if t in reorder_after:  # beam search keeps some hypotheses, duplicates others
                stock.reorder_incremental_state(stock_state, reorder_after[t])
                ours.reorder_incremental_state(our_state, reorder_after[t])
        cached = ours._get_input_buffer(our_state)["prev_key"]
    assert cached.shape == (3, HEADS, 8, EMBED // HEADS)
    assert torch.allclose(cached, stock._get_input_buffer(stock_state)["prev_key"], atol=1e-6)


def test_unrotated_incremental_steps_equal_the_causal_full_sequence():
    _, ours = attention_pair()
    x, _, _ = inputs(t=6)
    state = {}
    with torch.no_grad():
        full, _ = ours(x, x, x, attn_mask=causal_mask(6), need_weights=False)
        step = [x[t : t + 1] for t in range(6)]
        steps = torch.cat([ours(s, s, s, incremental_state=state)[0] for s in step])
    assert torch.allclose(steps, full, atol=1e-5)


def test_rotation_switched_on_changes_the_attention():
    """The reference tests above would pass for any module that ignores ``rotary``; this one
    shows the module does rotate."""
    stock, _ = attention_pair()
    ours = PositionalSelfAttention.from_attention(stock, "rope", rotary=RotaryEmbedding(stock.head_dim)).eval()
    x, left_pad, _ = inputs()
    with torch.no_grad():
        want, _ = stock(x, x, x, key_padding_mask=left_pad)
        got, _ = ours(x, x, x, key_padding_mask=left_pad)
    assert not torch.allclose(got, want, atol=1e-3)


# --- a RoPE encoder and left padding ------------------------------------------------------------------------


def test_rope_encoder_output_does_not_depend_on_left_padding():
    """RoPE rotates by the index in the padded batch, not fairseq's padding-aware position; the
    scores depend on offsets only and pads are masked, so left padding must not matter."""
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", "rope", "--decoder-pos", "rope", task=task)
    d = task.source_dictionary
    g = torch.Generator().manual_seed(4)
    sentence = torch.randint(d.nspecial, len(d), (1, 6), generator=g)
    longer = torch.randint(d.nspecial, len(d), (1, 10), generator=g)
    batch = torch.cat([torch.cat([torch.full((1, 4), PAD), sentence], 1), longer])  # left-padded by 4
    with torch.no_grad():
        alone = model.encoder(sentence, torch.tensor([6]))["encoder_out"][0][:, 0]  # (T, C)
        padded = model.encoder(batch, torch.tensor([6, 10]))["encoder_out"][0][4:, 0]
        prev = torch.cat([torch.full((1, 1), d.eos()), sentence[:, :4]], 1)
        dec_alone, _ = model(sentence, torch.tensor([6]), prev)
        dec_padded, _ = model(batch, torch.tensor([6, 10]), prev.expand(2, -1))
    assert torch.allclose(padded, alone, atol=1e-5)
    assert torch.allclose(dec_padded[0], dec_alone[0], atol=1e-5)
    # ...whereas the positions do reach the encoder: a shuffled sentence gives another output
    with torch.no_grad():
        shuffled = model.encoder(sentence[:, [1, 0, 2, 3, 4, 5]], torch.tensor([6]))["encoder_out"][0][:, 0]
    assert not torch.allclose(shuffled[2:], alone[2:], atol=1e-4)
