"""posenc.encodings against fairseq's own modules and the closed-form definitions."""

import math

import pytest
import torch
from fairseq import utils as fairseq_utils
from fairseq.models.fconv import PositionalEmbedding as FConvPositionalEmbedding
from fairseq.modules import PositionalEmbedding as FairseqPositionalEmbedding
from fairseq.modules import SinusoidalPositionalEmbedding as FairseqSinusoidal

from posenc.encodings import (
    AlibiBias,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    T5RelativeBias,
    alibi_slopes,
    fconv_learned_positions,
    make_positions,
    relative_position_bucket,
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


# --- ALiBi and T5 relative biases -------------------------------------------------------------------

def test_alibi_slopes_for_eight_heads_are_the_papers():
    assert alibi_slopes(8).tolist() == [1 / 2 ** h for h in range(1, 9)]


@pytest.mark.parametrize("heads,exponents", [
    (4, [2, 4, 6, 8]),                    # 2^(-8/4) = 1/4, ratio 1/4
    (16, [h / 2 for h in range(1, 17)]),  # 2^(-1/2), 2^(-1), ...
    # Not a power of two: the 4 slopes of n = 4, then every other slope of 2n = 8 (1/2, 1/8).
    (6, [2, 4, 6, 8, 1, 3]),
    # n = 8, then every other of 16 (2^-0.5, 2^-1.5, 2^-2.5, ...), the first 4 of them.
    (12, [1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5]),
])
def test_alibi_slopes_follow_the_papers_rule(heads, exponents):
    assert torch.allclose(alibi_slopes(heads), torch.tensor([2.0 ** -e for e in exponents]))


def test_alibi_bias_matrices_in_closed_form():
    """Two heads (slopes 1/16, 1/256), three queries and three keys, written out."""
    m = torch.tensor([1 / 16, 1 / 256])[:, None, None]
    symmetric = torch.tensor([[0., 1., 2.],
                              [1., 0., 1.],
                              [2., 1., 0.]])
    causal = torch.tensor([[0., 0., 0.],   # keys after the query: 0 (the causal mask removes them)
                           [1., 0., 0.],
                           [2., 1., 0.]])
    assert torch.equal(AlibiBias(2, causal=False)(3, 3), -m * symmetric)
    assert torch.equal(AlibiBias(2, causal=True)(3, 3), -m * causal)
    # An incremental step: the query at position 3 (3 cached keys) sees distances 3, 2, 1, 0.
    step = AlibiBias(2, causal=True)(1, 4, offset=3)
    assert torch.equal(step, -m * torch.tensor([[3., 2., 1., 0.]]))
    assert dict(AlibiBias(2, causal=True).named_parameters()) == {} and AlibiBias(2, causal=True).state_dict() == {}


def test_alibi_bias_is_cached_per_length_and_grows_without_limit():
    alibi = AlibiBias(8, causal=False)
    first = alibi(5, 5)
    assert alibi(5, 5) is first  # computed once for all layers of a side
    assert alibi(6, 6) is not first and torch.equal(alibi(6, 6)[:, :5, :5], first)
    long = alibi(3000, 3000, dtype=torch.float16)  # longer than any training sentence or table
    assert long.shape == (8, 3000, 3000) and long.dtype == torch.float16
    assert long[0, 0, 2999].item() == pytest.approx(-2999 / 2, rel=1e-3)


def t5_bucket_reference(relative, bidirectional, num_buckets=32, max_distance=128):
    """T5's bucket of one relative position (key minus query), from the definition in Raffel et
    al. (2020, sec. 2.1) and mesh-tensorflow's docstring, one integer at a time: in each
    direction, half the buckets hold the exact distances 0, 1, ..., the other half are
    logarithmically wider up to max_distance, and farther distances share the last bucket.
    Bidirectional: keys after the query use the upper half of the buckets. Causal: only keys
    at or before the query count; later ones fall in bucket 0."""
    if bidirectional:
        half = num_buckets // 2
        offset = half if relative > 0 else 0
        distance = abs(relative)
    else:
        half = num_buckets
        offset = 0
        distance = max(-relative, 0)
    exact = half // 2
    if distance < exact:
        return offset + distance
    log_bucket = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (half - exact))
    return offset + min(log_bucket, half - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_of_every_distance_matches_the_definition(bidirectional):
    relative = torch.arange(-200, 201)
    ours = relative_position_bucket(relative, bidirectional)
    expected = [t5_bucket_reference(r, bidirectional) for r in range(-200, 201)]
    assert ours.tolist() == expected
    # Landmarks worked out by hand. Bidirectional: 8 exact distances, then bucket 8 + b from
    # distance 8 * 16^(b/8) on, so the last one (15) from 8 * 16^(7/8) = 90.5. Causal: 16 exact,
    # then 16 + b from 16 * 8^(b/16) on, the last one (31) from 16 * 8^(15/16) = 112.5.
    at = dict(zip(range(-200, 201), ours.tolist()))
    if bidirectional:
        assert (at[0], at[-1], at[-7], at[-8], at[-15], at[-16], at[-90], at[-91], at[-200]) == \
            (0, 1, 7, 8, 9, 10, 14, 15, 15)
        assert (at[1], at[7], at[8], at[90], at[91], at[200]) == (17, 23, 24, 30, 31, 31)
    else:
        assert (at[0], at[-1], at[-15], at[-16], at[-112], at[-113], at[-200]) == (0, 1, 15, 16, 30, 31, 31)
        assert all(at[r] == 0 for r in range(1, 201))
    # Every bucket is reached, except (as in T5) the upper half's distance-0 bucket: a key after
    # the query is at least 1 away.
    assert sorted(set(ours.tolist())) == [b for b in range(32) if not (bidirectional and b == 16)]


def test_t5_bias_looks_up_one_scalar_per_head_and_bucket():
    bias = T5RelativeBias(num_heads=3, causal=False, init_std=1.0)
    assert bias.weight.shape == (32, 3)
    out = bias(4, 6, offset=2)
    assert out.shape == (3, 4, 6)
    for i in range(4):
        for j in range(6):
            bucket = t5_bucket_reference(j - (i + 2), bidirectional=True)
            assert torch.equal(out[:, i, j], bias.weight[bucket])
    # Gradients reach exactly the buckets used, though the bucket indices are cached.
    assert bias.buckets(4, 6, 2) is bias.buckets(4, 6, 2)
    bias(4, 6, offset=2).sum().backward()
    used = set(bias.buckets(4, 6, 2).flatten().tolist())
    assert {b for b in range(32) if bias.weight.grad[b].abs().sum() > 0} == used
