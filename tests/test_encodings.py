"""posenc.encodings against fairseq's own modules and the closed-form definitions."""

import math

import pytest
import torch
from fairseq import utils as fairseq_utils
from fairseq.models.fconv import PositionalEmbedding as FConvPositionalEmbedding
from fairseq.modules import PositionalEmbedding as FairseqPositionalEmbedding
from fairseq.modules import SinusoidalPositionalEmbedding as FairseqSinusoidal

from posenc.encodings import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    fconv_learned_positions,
    make_positions,
    sinusoid_table,
    transformer_learned_positions,
)

PAD = 1


def padded_tokens(seed=0, bsz=4, length=9):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, 50, (bsz, length), generator=g)
    tokens[0, :3] = PAD  # left padding
    tokens[1, -2:] = PAD  # right padding
    return tokens


def test_make_positions_matches_fairseq():
    tokens = padded_tokens()
    assert torch.equal(make_positions(tokens, PAD), fairseq_utils.make_positions(tokens, PAD))
    assert make_positions(tokens, PAD)[0, 3].item() == PAD + 1  # first real token after left pads


@pytest.mark.parametrize("dim", [8, 9, 64, 512])
def test_fairseq_variant_equals_fairseq_table(dim):
    ours = sinusoid_table(300, dim, "fairseq", padding_idx=PAD)
    theirs = FairseqSinusoidal.get_embedding(300, dim, PAD)
    assert torch.allclose(ours, theirs, atol=1e-6)


@pytest.mark.parametrize("dim", [4, 10, 512])
def test_paper_variant_equals_vaswani_formula(dim):
    table = sinusoid_table(120, dim, "paper", dtype=torch.float64)
    for p in (0, 1, 7, 119):
        for i in range(dim // 2):
            angle = p / 10000 ** (2 * i / dim)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_unknown_variant_names_the_allowed_ones():
    with pytest.raises(ValueError, match="paper, fairseq"):
        sinusoid_table(10, 8, "vaswani")


def test_sinusoidal_module_matches_fairseq_module_full_and_incremental():
    tokens = padded_tokens(length=12)
    ours = SinusoidalPositionalEmbedding(16, PAD, variant="fairseq", init_size=6)  # grows on demand
    theirs = FairseqSinusoidal(16, PAD, init_size=6)
    assert torch.allclose(ours(tokens), theirs(tokens), atol=1e-6)
    step = ours(tokens[:, :5], incremental_state={})
    assert step.shape == (4, 1, 16)
    assert torch.allclose(step, theirs(tokens[:, :5], incremental_state={}), atol=1e-6)
    assert ours.state_dict() == {} and dict(ours.named_parameters()) == {}


def test_sinusoidal_scale_multiplies_the_table():
    tokens = padded_tokens()
    plain = SinusoidalPositionalEmbedding(16, PAD)(tokens)
    scaled = SinusoidalPositionalEmbedding(16, PAD, scale=0.25)(tokens)
    assert torch.allclose(scaled, 0.25 * plain)


def test_learned_module_matches_fairseq_lookup_full_and_incremental():
    from fairseq.modules import LearnedPositionalEmbedding as FairseqLearned
    tokens = padded_tokens()
    ours = LearnedPositionalEmbedding(40, 8, PAD)
    theirs = FairseqLearned(40, 8, PAD)
    theirs.load_state_dict(ours.state_dict())
    assert torch.equal(ours(tokens), theirs(tokens))
    assert torch.equal(ours(tokens[:, :4], incremental_state={}), theirs(tokens[:, :4], incremental_state={}))
    assert ours.max_positions == theirs.max_positions == 40 - PAD - 1


def test_transformer_table_layout_and_init_follow_fairseq():
    ours = transformer_learned_positions(256, 64, PAD)
    theirs = FairseqPositionalEmbedding(256, 64, PAD, learned=True)
    assert ours.weight.shape == theirs.weight.shape == (256 + PAD + 1, 64)
    assert ours.max_positions == theirs.max_positions == 256
    assert torch.count_nonzero(ours.weight[PAD]) == 0
    assert ours.weight[PAD + 1:].std().item() == pytest.approx(64 ** -0.5, rel=0.05)


def test_fconv_table_layout_and_init_follow_fairseq():
    ours = fconv_learned_positions(1024, 64, PAD)
    theirs = FConvPositionalEmbedding(1024, 64, PAD)
    assert ours.weight.shape == theirs.weight.shape == (1024, 64)
    assert ours.max_positions == theirs.max_positions == 1022
    assert torch.count_nonzero(ours.weight[PAD]) == 0
    assert ours.weight[PAD + 1:].std().item() == pytest.approx(0.1, rel=0.05)


def rotation_reference(x, positions, base=10000.0):
    """RoFormer eq. (13): each pair (2i, 2i+1) rotated by the angle m * base^(-2i/d), written out."""
    d = x.size(-1)
    out = torch.empty_like(x)
    for t, m in enumerate(positions):
        for i in range(d // 2):
            theta = m * base ** (-2 * i / d)
            c, s = math.cos(theta), math.sin(theta)
            a, b = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = a * c - b * s
            out[..., t, 2 * i + 1] = a * s + b * c
    return out


def test_rope_equals_the_rotation_formula():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    rope = RotaryEmbedding(8)
    assert torch.allclose(rope(x.float(), offset=3).double(), rotation_reference(x, range(3, 8)), atol=1e-5)


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, init_size=8)  # forces the cache to grow
    q, k = torch.randn(16), torch.randn(16)

    def score(m, n):
        qm = rope(q.view(1, 16), offset=m)
        kn = rope(k.view(1, 16), offset=n)
        return (qm * kn).sum().item()

    for m, n in [(0, 3), (5, 2), (10, 10)]:
        for shift in (1, 7, 100):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-4)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3  # and it does depend on the offset


def test_rope_offset_continues_a_prefix_and_keeps_norms():
    rope = RotaryEmbedding(8)
    x = torch.randn(3, 10, 8)
    whole = rope(x)
    assert torch.allclose(rope(x[:, 6:], offset=6), whole[:, 6:], atol=1e-6)
    assert torch.allclose(whole.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert dict(rope.named_parameters()) == {} and rope.state_dict() == {}


def test_rope_refuses_odd_head_dim():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
