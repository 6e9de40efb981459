"""posenc.analysis against closed-form math: exercises 3.1-3.3, proximity properties, probes."""

import math

import numpy as np
import pytest
import torch

from posenc.analysis.measure.periods import dominant_periods, sinusoid_wavelengths
from posenc.analysis.measure.probes import absolute_position_probe, position_folds, relative_order_probe
from posenc.analysis.measure.properties import (
    attention_logit_properties,
    attention_logits,
    dot_product_properties,
    gram,
    monotone_range,
    pairwise_symmetry,
)
from posenc.analysis.measure.relative_linear import (
    apply_shift,
    factorisation_check,
    fit_shift_lstsq,
    pair_columns,
    relative_linear_errors,
    shift_matrix,
)
from posenc.analysis.measure.scale import expected_gaussian_norm, init_token_comparison, norm_stats
from posenc.encodings.sinusoidal import sinusoid_frequencies, sinusoid_table

VARIANTS = ("paper", "fairseq")


def random_table(n, d, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- exercise 3.1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_pair_columns_pick_sin_and_cos_of_each_frequency(variant):
    d, n = 12, 30
    t = sinusoid_table(n, d, variant, dtype=torch.float64)
    si, ci = pair_columns(d, variant)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * sinusoid_frequencies(d, variant, torch.float64)
    assert torch.allclose(t[:, si], torch.sin(angles), atol=1e-15)
    assert torch.allclose(t[:, ci], torch.cos(angles), atol=1e-15)
    assert sorted(torch.cat([si, ci]).tolist()) == list(range(d))


@pytest.mark.parametrize("variant", VARIANTS)
def test_shift_matrix_is_a_block_rotation_group(variant):
    d = 10
    m3, m4, m7 = (shift_matrix(k, d, variant) for k in (3, 4, 7))
    assert torch.allclose(m3.T @ m3, torch.eye(d, dtype=torch.float64), atol=1e-14)
    assert torch.allclose(m3 @ m4, m7, atol=1e-14)
    assert torch.equal(shift_matrix(0, d, variant), torch.eye(d, dtype=torch.float64))
    # each row has exactly two non-zeros: its own pair (block diagonal, one 2x2 block per pair)
    assert (m3.abs() > 0).sum(1).tolist() == [2] * d


@pytest.mark.parametrize("variant", VARIANTS)
def test_apply_shift_equals_dense_matrix(variant):
    t = random_table(20, 16)
    for k in (0, 1, 5, 19):
        assert torch.allclose(apply_shift(t, k, variant), t @ shift_matrix(k, 16, variant).T, atol=1e-13)


@pytest.mark.parametrize("variant", VARIANTS)
def test_exercise_3_1_relative_linear_error_float64_and_float32(variant):
    n, d = 1024, 16
    r64 = relative_linear_errors(sinusoid_table(n, d, variant, dtype=torch.float64), variant)
    r32 = relative_linear_errors(sinusoid_table(n, d, variant, dtype=torch.float32), variant)
    assert r64["pairs_checked"] == n * (n + 1) // 2  # every p, k with p + k < n
    assert r64["max_error"] < 1e-10
    assert r32["max_error"] < 1e-4
    # not vacuous: the float32 error is real rounding, and a table without the structure fails
    assert r32["max_error"] > 1e-7
    assert relative_linear_errors(random_table(64, d), variant)["max_error"] > 0.5


@pytest.mark.parametrize("variant", VARIANTS)
def test_least_squares_shift_matches_closed_form(variant):
    # d=8 over 2000 positions: the table has full rank, so the free DxD fit is unique
    t = sinusoid_table(2000, 8, variant, dtype=torch.float64)
    for k in (1, 3, 50):
        fit = fit_shift_lstsq(t, k, variant)
        assert fit["full"]["identifiable"]
        assert fit["full"]["max_abs_diff_from_closed_form"] < 1e-10
        assert torch.allclose(fit["fitted_full"], shift_matrix(k, 8, variant), atol=1e-10)
        assert fit["block"]["max_abs_diff_from_closed_form"] < 1e-10
    # d=64 over 128 positions: the slow columns are nearly dependent, the free fit is not unique
    # and is reported as such; the block fit still recovers M(k)
    short = fit_shift_lstsq(sinusoid_table(128, 64, variant, dtype=torch.float64), 2, variant)
    assert not short["full"]["identifiable"] and short["full"]["table_rank"] < 64
    assert short["full"]["residual_max"] < 1e-9
    assert short["block"]["max_abs_diff_from_closed_form"] < 1e-10


@pytest.mark.parametrize("variant", VARIANTS)
def test_difference_factors_into_k_part_and_p_part(variant):
    d, n = 32, 200
    t = sinusoid_table(n, d, variant, dtype=torch.float64)
    fact = factorisation_check(t, variant, max_k=16)
    assert fact["max_error"] < 1e-10
    assert fact["rank2_residual"] < 1e-10
    # explicitly: PE(p+k) - PE(p) = A(k) B(p) with A(k) = M(k) - I and B(p) = PE(p)
    k, p = 7, 55
    a_k = shift_matrix(k, d, variant) - torch.eye(d, dtype=torch.float64)
    assert torch.allclose(t[p + k] - t[p], a_k @ t[p], atol=1e-13)
    rand = factorisation_check(random_table(n, d), variant, max_k=16)
    assert rand["max_error"] > 0.5 and rand["rank2_residual"] > 0.05


# --- exercise 3.2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_wavelengths_are_two_pi_over_frequency(variant):
    d, n = 16, 500
    wl = sinusoid_wavelengths(d, variant)
    freqs = sinusoid_frequencies(d, variant, torch.float64)
    si, ci = pair_columns(d, variant)
    assert torch.allclose(wl[si], 2 * math.pi / freqs, rtol=1e-15)
    assert torch.equal(wl[si], wl[ci])
    # and each column of the table really is sin(2 pi p / wavelength)
    t = sinusoid_table(n, d, variant, dtype=torch.float64)
    p = torch.arange(n, dtype=torch.float64)
    for j in si.tolist():
        assert torch.allclose(t[:, j], torch.sin(2 * math.pi * p / wl[j]), atol=1e-10)
    assert math.isclose(float(wl.min()), 2 * math.pi)
    top = 10000.0 if variant == "fairseq" else 10000.0 ** ((d - 2) / d)
    assert math.isclose(float(wl.max()), 2 * math.pi * top, rel_tol=1e-12)


def test_dominant_period_recovers_integer_periods():
    n = 240
    p = torch.arange(n, dtype=torch.float64)
    periods = [4.0, 10.0, 48.0, 240.0]
    t = torch.stack([torch.sin(2 * math.pi * p / T + 0.3) for T in periods], 1)
    assert dominant_periods(t).tolist() == periods


# --- exercise 3.3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("d", [4, 64, 512])
def test_norm_is_sqrt_half_d_at_every_position(variant, d):
    t = sinusoid_table(1024, d, variant, dtype=torch.float64)
    norms = t.norm(dim=1)
    assert (norms - math.sqrt(d / 2)).abs().max() < 1e-12
    stats = norm_stats(t)
    assert abs(stats["norm_mean"] - math.sqrt(d / 2)) < 1e-12 and stats["norm_std"] < 1e-12
    t32 = sinusoid_table(1024, d, variant, dtype=torch.float32)
    assert (t32.double().norm(dim=1) - math.sqrt(d / 2)).abs().max() < 1e-4


def test_token_norm_ratio_matches_fairseq_init():
    d = 512
    # E||N(0, I_d)|| -> sqrt(d - 1/2) (to O(d^-3/2)); with std d^-1/2 and scale sqrt(d) that is the token norm
    assert abs(expected_gaussian_norm(d, 1.0) - math.sqrt(d - 0.5)) < 1e-3
    cmp = init_token_comparison(math.sqrt(d / 2), d, samples=4000)
    tr = cmp["transformer"]
    assert abs(tr["token_norm_sampled"] - tr["token_norm_expected"]) < 0.05
    assert abs(tr["pe_to_token_norm_ratio"] - 1 / math.sqrt(2)) < 1e-3
    assert abs(cmp["fconv"]["token_norm_expected"] - 0.1 * math.sqrt(d - 0.5)) < 1e-3


# --- properties (Wang et al. 2021) ----------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_sinusoid_proximity_is_exactly_translation_invariant_and_symmetric(variant):
    n, d = 200, 64
    t = sinusoid_table(n, d, variant, dtype=torch.float64)
    g = gram(t)
    # phi(x, x+m) = sum_i cos(m w_i) for every x
    w = sinusoid_frequencies(d, variant, torch.float64).numpy()
    for m in (1, 5, 77):
        assert np.allclose(np.diagonal(g, m), np.cos(m * w).sum(), atol=1e-11)
    props = dot_product_properties(t)
    assert abs(props["translation_invariance"] - 1) < 1e-12
    assert props["monotonicity_local16"] > 0.95 and props["monotonicity"] > 0.5
    assert props["proximity"].startswith("dot product")


def test_dot_product_symmetry_holds_by_construction_for_any_table():
    """Even a random table is symmetric under the dot product: the number is no finding."""
    props = dot_product_properties(random_table(60, 16))
    assert abs(props["symmetry"] - 1) < 1e-12 and props["symmetry_max_abs_error"] < 1e-12
    assert props["symmetry_holds_by_construction"] is True


def test_random_table_violates_the_properties():
    props = dot_product_properties(random_table(200, 64))
    assert props["translation_invariance"] < 0.1
    assert abs(props["monotonicity"]) < 0.1


def test_translation_invariance_detects_a_partial_violation():
    t = sinusoid_table(100, 32, "paper", dtype=torch.float64)
    t[50:] *= 1.5  # scaling half the table breaks phi(x, x+m) = f(m)
    ti = dot_product_properties(t)["translation_invariance"]
    assert 0.2 < ti < 0.99


# --- attention-logit proximity: a hand-built asymmetric case with closed-form answers ---------------


def rotation(alpha):
    return torch.tensor([[math.cos(alpha), -math.sin(alpha)], [math.sin(alpha), math.cos(alpha)]], dtype=torch.float64)


def hand_built_heads(n, w_slow, w_fast):
    """Three heads of width 2 over a 6-wide table PE_p = (sin p w1, cos p w1, sin p w1, cos p w1,
    sin p w2, cos p w2). Head h reads its own pair: W_Q^h = I, W_K^h = R(alpha_h).

    With u(a) = (sin a, cos a): R(alpha) u(b) = u(b - alpha) and u(a) . u(c) = cos(a - c), so
    phi_h(x, y) = s cos((y - x) w - alpha_h): alpha = 0 symmetric, alpha = pi/2 antisymmetric
    (s sin(m w)), alpha = pi/4 in between."""
    p = torch.arange(n, dtype=torch.float64)
    table = torch.stack([torch.sin(p * w_slow), torch.cos(p * w_slow), torch.sin(p * w_slow), torch.cos(p * w_slow),
                         torch.sin(p * w_fast), torch.cos(p * w_fast)], 1)
    w_q = torch.eye(6, dtype=torch.float64)  # fairseq's Linear: q = x @ w_q.T
    w_k = torch.block_diag(rotation(0.0), rotation(math.pi / 2), rotation(math.pi / 4))
    return table, w_q, w_k, (0.0, math.pi / 2, math.pi / 4)


def test_attention_logits_equal_the_closed_form_per_head():
    n, w1, w2 = 16, 0.1, 2 * math.pi / 16
    table, w_q, w_k, alphas = hand_built_heads(n, w1, w2)
    scaling = 2 ** -0.5  # fairseq: head_dim ** -0.5
    logits = attention_logits(table, w_q, w_k, heads=3, scaling=scaling)
    m = np.arange(n)[None, :] - np.arange(n)[:, None]  # y - x
    for h, (w, alpha) in enumerate(zip((w1, w1, w2), alphas)):
        assert np.allclose(logits[h], scaling * np.cos(m * w - alpha), atol=1e-13)


def test_attention_logit_properties_on_the_hand_built_case():
    n, w1, w2 = 16, 0.1, 2 * math.pi / 16
    table, w_q, w_k, _ = hand_built_heads(n, w1, w2)
    report, _ = attention_logit_properties(table, w_q, w_k, heads=3, scaling=2 ** -0.5)
    sym, anti, mixed = report["per_head"]
    # every head depends on the offset only
    for head in report["per_head"]:
        assert abs(head["translation_invariance"] - 1) < 1e-12
    # alpha = 0: s cos(m w1), falling in |m| up to (n - 1) w1 = 1.5 < pi: symmetric, monotone both ways
    assert abs(sym["symmetry"] - 1) < 1e-12
    assert sym["monotonicity_forward"] == pytest.approx(1) and sym["monotonicity_backward"] == pytest.approx(1)
    # alpha = pi/2: s sin(m w1), rising ahead and falling behind: antisymmetric, monotone only backwards
    assert abs(anti["symmetry"] + 1) < 1e-12
    assert anti["monotonicity_forward"] == pytest.approx(-1) and anti["monotonicity_backward"] == pytest.approx(1)
    assert abs(anti["monotonicity"]) < 1e-12
    # alpha = pi/4 at w2 = 2 pi / n: with S = cos(a) cos(m w) (even) and A = sin(a) sin(m w) (odd)
    # over the ordered pairs x != y, symmetry = (var S - var A) / (var S + var A), where the
    # Fejer sums give sum cos(m w) = -n, sum cos^2 = n(n-2)/2, sum sin^2 = n^2/2 over n(n-1) pairs.
    pairs = n * (n - 1)
    var_cos = (n * (n - 2) / 2) / pairs - (-n / pairs) ** 2
    mean_sin2 = (n * n / 2) / pairs
    expected = (0.5 * var_cos - 0.5 * mean_sin2) / (0.5 * var_cos + 0.5 * mean_sin2)
    assert mixed["symmetry"] == pytest.approx(expected, abs=1e-12)
    assert -0.1 < expected < -0.05  # neither symmetric nor antisymmetric
    assert report["mean_over_heads"]["symmetry"] == pytest.approx((1 - 1 + expected) / 3, abs=1e-12)
    assert report["scaling"] == 2 ** -0.5 and report["heads"] == 3


def test_pairwise_symmetry_of_a_random_bilinear_form_is_near_zero():
    g = random_table(80, 80, seed=5).numpy()
    assert abs(pairwise_symmetry(g)) < 0.05
    assert pairwise_symmetry(g + g.T) == pytest.approx(1) and pairwise_symmetry(g - g.T) == pytest.approx(-1)


def test_monotone_range_is_the_first_rise():
    assert monotone_range([5, 4, 3, 3.5, 1]) == 2
    assert monotone_range([3, 2, 1, 0]) == 3
    assert monotone_range([1, 1]) == 0


# --- probes (Wang & Chen 2020) --------------------------------------------------------------------


def test_folds_partition_positions():
    folds = position_folds(103, 5, seed=3)
    assert sorted(torch.cat(folds).tolist()) == list(range(103))
    assert [len(f) for f in folds] == [21, 21, 21, 20, 20]


@pytest.mark.parametrize("variant", VARIANTS)
def test_probes_near_zero_error_for_sinusoid(variant):
    t = sinusoid_table(128, 64, variant, dtype=torch.float64)
    ab = absolute_position_probe(t)
    assert ab["mae"] < 0.5 and ab["chance_mae"] > 30
    assert relative_order_probe(t, train_pairs=3000, test_pairs=1000)["error"] < 0.05


def test_probes_near_chance_for_random_table():
    t = random_table(128, 64, seed=1)
    ab = absolute_position_probe(t)
    assert ab["mae_over_chance"] > 0.8
    assert relative_order_probe(t, train_pairs=3000, test_pairs=1000)["error"] > 0.4


def test_random_pair_split_is_misleading_when_d_exceeds_n():
    # d >= N: a random table separates random pairs of *seen* positions, not held-out ones
    ro = relative_order_probe(random_table(64, 128, seed=2), train_pairs=3000, test_pairs=1000)
    assert ro["random_pair_split_error"] < 0.1
    assert ro["error"] > 0.3
