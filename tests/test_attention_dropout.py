"""The attention kinds' forward (``PositionalSelfAttention``) draws its attention dropout as stock
fairseq ``MultiheadAttention`` does: with a zero position term, the same seed gives the same
outputs and leaves the global RNG in the same state, layer by layer and through a whole
Transformer in training (t5 with a zero bias, shaw with zero vectors, against no positions). This
is a CPU check: on a GPU the fused kernels draw dropout inside the kernel, and shaw's explicit path
does not use them (docs/plugin.md says which comparisons share masks)."""

import pytest
import torch
from fairseq.modules import MultiheadAttention

from fairseq_helpers import DummyTask, build, random_batch
from posenc.fairseq_plugin.positional_attention import PositionalSelfAttention

E, H, T, B = 32, 4, 7, 3


class ZeroBias(torch.nn.Module):
    num_heads = H

    def forward(self, q_len, k_len, offset, dtype=None):
        return torch.zeros(H, q_len, k_len, dtype=dtype)


class ZeroRelative(torch.nn.Module):
    def key_logits(self, q, k_len, offset):
        return q.new_zeros(q.shape[:-1] + (k_len,))

    def value_term(self, weights, offset):
        return weights.new_zeros(weights.shape[:-1] + (E // H,))


def identity_rotary(x, offset):
    return x


TERMS = {"rotary": {"rotary": identity_rotary}, "bias": {"bias": ZeroBias()}, "relative": {"relative": ZeroRelative()}}


def masks(side):
    padding = torch.zeros(B, T, dtype=torch.bool)
    if side == "encoder":
        padding[0, :2] = True  # left padding
        return padding, None
    padding[-1, -2:] = True  # right padding, under the causal mask
    return padding, torch.triu(torch.full((T, T), float("-inf")), 1)


def run(attention, x, side, seed=5):
    padding, causal = masks(side)
    torch.manual_seed(seed)
    out, _ = attention(x, x, x, key_padding_mask=padding, attn_mask=causal, need_weights=False)
    return out, torch.get_rng_state()


@pytest.mark.parametrize("term", list(TERMS))
@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_a_zero_term_draws_the_stock_attention_dropout(term, side):
    torch.manual_seed(0)
    stock = MultiheadAttention(E, H, dropout=0.3, self_attention=True).train()
    twin = PositionalSelfAttention.from_attention(stock, term, **TERMS[term]).train()
    x = torch.randn(T, B, E)
    (want, want_rng), (got, got_rng) = run(stock, x, side), run(twin, x, side)
    assert torch.equal(want_rng, got_rng)
    assert torch.allclose(got, want, atol=1e-6)
    assert not torch.allclose(run(stock, x, side, seed=6)[0], want, atol=1e-3)  # dropout does act


def zeroed(model, pattern):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if pattern in name:
                p.zero_()
    return model


@pytest.mark.parametrize("kind,pattern", [("t5", "relative_attention_bias"), ("shaw", "self_attn.relative")])
def test_a_transformer_with_a_zero_relative_term_trains_as_one_without_positions(kind, pattern):
    task = DummyTask()
    batch = random_batch(task.source_dictionary, bsz=4, src_len=9)
    flags = ("--dropout", "0.2", "--attention-dropout", "0.3")
    plain, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none", *flags, task=task)
    ours, _ = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind, *flags, task=task)
    zeroed(ours, pattern)
    outputs = []
    for model in (plain.train(), ours.train()):
        torch.manual_seed(11)
        out, _ = model(*batch)
        outputs.append((out.detach(), torch.get_rng_state()))
    (want, want_rng), (got, got_rng) = outputs
    assert torch.equal(want_rng, got_rng)
    assert torch.allclose(got, want, atol=1e-5)
