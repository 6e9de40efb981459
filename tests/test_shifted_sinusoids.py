"""``shape`` (Kiyono et al. 2021) and ``cape`` (Likhomanenko et al. 2021): at inference SHAPE is
``sinusoidal`` at positions shifted by ``shape_eval_offset`` (K by default, as the authors decode;
at 0 it is ``sinusoidal`` with the same weights) and CAPE the closed-form continuous sinusoid; in
training the positions each sequence was given are read back from the embeddings and checked
against the rules: SHAPE one integer offset k in 0..K-1 per sequence (the authors' code), CAPE
(x + Delta + epsilon_i) * lambda with each draw inside its range. Their draws come from a generator
of their own: a training step leaves the global RNG (every later dropout mask) as ``sinusoidal``
leaves it, and a module state saved and loaded mid-training draws what an uninterrupted one would.
Also what posenc-pe says of them."""

import argparse
import copy
import io
import math

import pytest
import torch

from fairseq_helpers import PAD, DummyTask, build, decoder_output, random_batch
from posenc.analysis.read.position_tables import extract_tables
from posenc.encodings.shifted import CapeEmbedding, ShiftedSinusoidalEmbedding
from posenc.encodings.sinusoidal import SinusoidalPositionalEmbedding, sinusoid_frequencies
from posenc.fairseq_plugin.options import fill_position_defaults
from test_analysis_rebuild import save_like_fairseq

SMALL = {"fconv": "posenc_fconv_small", "transformer": "posenc_transformer_small"}
DIM = 32


def tokens_with_left_padding(bsz=300, t_len=9):
    """Real tokens (5) with the first sentences left-padded by up to 4."""
    tokens = torch.full((bsz, t_len), 5)
    for b in range(bsz):
        tokens[b, : b % 5] = PAD
    return tokens


def without_generators(state: dict) -> dict:
    """A state dict without the shift generators' states (``sinusoidal`` has none)."""
    return {k: v for k, v in state.items() if not k.endswith("._extra_state")}


@pytest.mark.parametrize("family", ["fconv", "transformer"])
@pytest.mark.parametrize("kind,flags", [("shape", ["--shape-eval-offset", "0"]), ("cape", [])])
def test_at_inference_the_model_equals_sinusoidal_with_the_same_weights(family, kind, flags):
    task = DummyTask()
    ours, _ = build(SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind, *flags, task=task)
    sinusoidal, _ = build(SMALL[family], "--encoder-pos", "sinusoidal", "--decoder-pos", "sinusoidal", task=task)
    sinusoidal.load_state_dict(ours.state_dict(), strict=True)  # no position parameters; generators dropped
    batch = random_batch(task.source_dictionary, src_len=9)
    assert torch.allclose(decoder_output(ours, *batch), decoder_output(sinusoidal, *batch), atol=1e-6)
    # ...and in training mode they differ: the positions move.
    ours.train()
    src = batch[0]
    sinusoidal_rows = sinusoidal.encoder.embed_positions(src)
    assert not torch.allclose(ours.encoder.embed_positions(src), sinusoidal_rows, atol=1e-3)


def shifted_rows(tokens: torch.Tensor, offset: int, dim: int = DIM) -> torch.Tensor:
    """fairseq's sinusoid at every real token's position moved by ``offset`` (pads: zero)."""
    table = SinusoidalPositionalEmbedding(dim, PAD, init_size=128).weights
    real = tokens.ne(PAD)
    positions = torch.cumsum(real, 1) + PAD + offset
    return torch.where(real[..., None], table[positions], torch.zeros(()))


@pytest.mark.parametrize("offset", [0, 3, 40])
def test_shape_at_inference_is_the_sinusoid_shifted_by_its_eval_offset(offset):
    shape = ShiftedSinusoidalEmbedding(DIM, PAD, max_shift=40, eval_offset=offset).eval()
    tokens = tokens_with_left_padding(bsz=5)
    assert torch.equal(shape(tokens), shifted_rows(tokens, offset))  # at 0: the plain sinusoid, unshifted
    for step in range(1, tokens.size(1) + 1):  # decoding steps (no padding in a decoder's prefix)
        prefix = torch.full((2, step), 5)
        assert torch.equal(shape(prefix, incremental_state={}), shifted_rows(prefix, offset)[:, -1:])
    shape.train()  # a decoding step is never shifted at random, even in training mode
    assert torch.equal(shape(torch.full((2, 4), 5), incremental_state={}), shifted_rows(torch.full((2, 4), 5),
                                                                                       offset)[:, -1:])


@pytest.mark.parametrize("family", ["fconv", "transformer"])
def test_the_models_shape_decodes_at_the_authors_offset_k_unless_told_otherwise(family):
    model, args = build(SMALL[family], "--encoder-pos", "shape", "--decoder-pos", "shape", "--shape-max-shift", "7")
    assert (args.shape_max_shift, args.shape_eval_offset) == (7, 7)  # resolved, so the checkpoint records it
    tokens = tokens_with_left_padding(bsz=5)
    for side in (model.encoder, model.decoder):
        rows = side.embed_positions(tokens)
        assert torch.allclose(rows, shifted_rows(tokens, 7, rows.size(-1)) * args.sinusoidal_scale, atol=1e-6)
    _, args = build(SMALL[family], "--encoder-pos", "shape", "--decoder-pos", "shape", "--shape-eval-offset", "0")
    assert (args.shape_max_shift, args.shape_eval_offset) == (40, 0)


def test_args_recorded_before_the_eval_offset_existed_decode_as_they_were_trained():
    """A checkpoint of before issue 40 records shape_max_shift but no shape_eval_offset: it was
    trained and validated at offset 0, so it decodes at 0, not at its K."""
    older = argparse.Namespace(shape_max_shift=40, sinusoidal_variant="fairseq", sinusoidal_scale=1.0,
                               sinusoidal_base=10000.0)
    fill_position_defaults(older, "shape", "shape", "transformer")
    assert older.shape_eval_offset == 0
    fresh = argparse.Namespace(shape_max_shift=None, shape_eval_offset=None)  # a new run's unset flags
    fill_position_defaults(fresh, "shape", "shape", "transformer")
    assert fresh.shape_eval_offset == fresh.shape_max_shift == 40


def closed_form(positions: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """fairseq's layout written out: sin(p w_i) in the first half, cos(p w_i) in the second, float64."""
    angles = positions.double()[..., None] * freqs.double()
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


def read_positions(rows: torch.Tensor, freqs: torch.Tensor, pair: int) -> torch.Tensor:
    """The position each row encodes, from the angle of one sin/cos pair (one whose period, 2 pi /
    w, exceeds every position here, so the angle is unambiguous)."""
    half = freqs.numel()
    angle = torch.atan2(rows[..., pair].double(), rows[..., half + pair].double())
    return angle / float(freqs[pair])


def middle_pair(freqs) -> int:
    return int((freqs - 0.05).abs().argmin())  # period ~125 positions


def test_shape_shifts_each_sequence_by_one_whole_offset_from_0_to_K_minus_1():
    K = 3
    shape = ShiftedSinusoidalEmbedding(DIM, PAD, max_shift=K, eval_offset=K).train()
    tokens = tokens_with_left_padding()
    rows = shape(tokens).double()
    table = SinusoidalPositionalEmbedding(DIM, PAD, init_size=64).weights.double()
    real = tokens.ne(PAD)
    shifts = []
    for b in range(tokens.size(0)):
        n = int(real[b].sum())
        assert rows[b, ~real[b]].abs().sum() == 0  # pads get nothing
        found = [k for k in range(K + 2) if torch.allclose(rows[b, real[b]], table[PAD + 1 + k : PAD + 1 + k + n])]
        assert len(found) == 1, b  # the sinusoid's rows at p + k, for exactly one k
        shifts.append(found[0])
    assert max(shifts) < K  # k never reaches K: the authors' randint(0, K)
    counts = torch.bincount(torch.tensor(shifts), minlength=K)
    # U{0..K-1}: 300 draws, 100 expected per value; each within +-5 sd of Binomial(300, 1/3)
    assert ((counts - 100).abs() < 5 * math.sqrt(300 * (1 / 3) * (2 / 3))).all(), counts
    shape.eval()
    assert torch.allclose(shape(tokens).double()[real], table[(torch.cumsum(real, 1) + PAD + K)[real]])


def test_shape_with_k_0_never_shifts():
    shape = ShiftedSinusoidalEmbedding(DIM, PAD, max_shift=0).train()
    tokens = tokens_with_left_padding(bsz=5)
    state = shape.generator.get_state()
    assert torch.equal(shape(tokens), shifted_rows(tokens, 0))
    assert torch.equal(shape.generator.get_state(), state)  # nothing drawn


@pytest.mark.parametrize("which", ["global_shift", "local_shift", "global_scaling"])
def test_cape_moves_positions_as_the_paper_says(which):
    a, b, c = 5.0, 0.5, 1.3
    settings = {"global_shift": dict(max_global_shift=a), "local_shift": dict(max_local_shift=b),
                "global_scaling": dict(max_global_scaling=c)}[which]
    cape = CapeEmbedding(DIM, PAD, **settings, seed=1).train()
    tokens = tokens_with_left_padding()
    rows = cape(tokens)
    freqs = sinusoid_frequencies(DIM, "fairseq")
    real = tokens.ne(PAD)
    index = (torch.cumsum(real, 1) - 1).double()  # x_i: 0 at the first real token
    x = read_positions(rows, freqs, middle_pair(freqs)) - (PAD + 1)  # the x_i' the rows encode
    # every row is the continuous sinusoid at its own position, read back from one pair
    assert torch.allclose(rows.double()[real], closed_form(x[real] + PAD + 1, freqs), atol=1e-4)
    assert rows[~real].abs().sum() == 0
    draws = []
    for s in range(tokens.size(0)):
        xs, i = x[s, real[s]], index[s, real[s]]
        if which == "global_shift":  # x' = x + Delta, one Delta per sequence
            delta = xs - i
            assert torch.allclose(delta, delta[0].expand_as(delta), atol=1e-3)
            draws.append(float(delta[0]))
        elif which == "local_shift":  # x'_i = x_i + epsilon_i, one epsilon per position
            draws += (xs - i).tolist()
        else:  # x' = x * lambda
            ratio = xs[1:] / i[1:]
            assert torch.allclose(ratio, ratio[0].expand_as(ratio), atol=1e-3)
            draws.append(math.log(float(ratio[0])))
    draws = torch.tensor(draws)
    bound = {"global_shift": a, "local_shift": b, "global_scaling": math.log(c)}[which]
    assert draws.abs().max() <= bound + 1e-3
    assert draws.min() < -0.8 * bound and draws.max() > 0.8 * bound  # the range is used, both ways
    assert abs(float(draws.mean())) < 0.1 * bound  # centred, as U[-bound, bound]
    cape.eval()
    assert torch.allclose(cape(tokens).double()[real], closed_form(index[real] + PAD + 1, freqs), atol=1e-5)


def test_cape_decoding_step_gives_the_newest_position():
    cape = CapeEmbedding(DIM, PAD, max_global_shift=5).eval()
    prefix = torch.full((2, 4), 5)
    assert torch.equal(cape(prefix, incremental_state={}), cape(prefix)[:, -1:])


@pytest.mark.parametrize("kind,flags,recorded", [
    ("shape", ["--shape-max-shift", "7", "--shape-eval-offset", "0"], {"shape_max_shift": 7}),
    ("cape", ["--cape-max-global-shift", "2", "--cape-max-global-scaling", "1.1"],
     {"cape_max_global_shift": 2.0, "cape_max_local_shift": 0.5, "cape_max_global_scaling": 1.1}),
])
def test_posenc_pe_rebuilds_the_sinusoid_and_names_the_shift_range(tmp_path, kind, flags, recorded):
    model, args = build("posenc_fconv_small", "--encoder-pos", kind, "--decoder-pos", "learned", *flags)
    ckpt = save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    table = extract_tables(ckpt)["encoder"]
    assert table.kind == kind and table.settings["trained_under"] == recorded
    rows = model.encoder.embed_positions(torch.full((1, 20), 5))[0].double()  # eval: the plain sinusoid
    assert torch.allclose(table.table[:20], rows, atol=1e-6)
    assert any("moved at random" in note for note in table.notes)


def test_posenc_pe_rebuilds_shapes_sinusoid_at_its_inference_offset(tmp_path):
    model, args = build("posenc_fconv_small", "--encoder-pos", "shape", "--decoder-pos", "learned",
                        "--shape-max-shift", "7")
    table = extract_tables(save_like_fairseq(tmp_path / "ckpt.pt", model, args))["encoder"]
    assert table.settings["inference_offset"] == 7 and table.settings["trained_under"] == {"shape_max_shift": 7}
    rows = model.encoder.embed_positions(torch.full((1, 20), 5))[0].double()  # eval: rows from position K on
    assert torch.allclose(table.table[:20], rows, atol=1e-6)
    assert any("shifted by 7 at inference" in note for note in table.notes)


# --- the shifts' own generator --------------------------------------------------------------------

def train_step(model, batch):
    """One training forward and backward of ``model`` on ``batch``; the decoder's output."""
    model.train()
    out, _ = model(*batch)
    out.float().sum().backward()
    return out.detach()


@pytest.mark.parametrize("family", ["fconv", "transformer"])
@pytest.mark.parametrize("kind", ["shape", "cape"])
def test_a_training_step_leaves_the_global_rng_as_sinusoidal_leaves_it(family, kind):
    task = DummyTask()
    batch = random_batch(task.source_dictionary, bsz=4, src_len=9)
    states = {}
    for pe in ("sinusoidal", kind):
        model, _ = build(SMALL[family], "--encoder-pos", pe, "--decoder-pos", pe, "--dropout", "0.3", task=task)
        torch.manual_seed(123)
        train_step(model, batch)
        train_step(model, batch)
        states[pe] = torch.get_rng_state()
    assert torch.equal(states["sinusoidal"], states[kind])  # the same dropout masks, step after step


def side_draws(model, tokens, steps):
    """The position rows each side draws over ``steps`` training forwards."""
    model.train()
    with torch.no_grad():
        return [torch.cat([model.encoder.embed_positions(tokens), model.decoder.embed_positions(tokens)])
                for _ in range(steps)]


@pytest.mark.parametrize("kind", ["shape", "cape"])
def test_a_module_state_saved_and_loaded_mid_training_draws_what_an_uninterrupted_one_draws(kind):
    flags = ("--encoder-pos", kind, "--decoder-pos", kind, "--seed", "3")
    tokens = tokens_with_left_padding(bsz=16)
    uninterrupted, _ = build(SMALL["transformer"], *flags)
    side_draws(uninterrupted, tokens, 2)
    saved = io.BytesIO()
    torch.save(uninterrupted.state_dict(), saved)  # a checkpoint mid-training
    later = side_draws(uninterrupted, tokens, 3)
    resumed, _ = build(SMALL["transformer"], *flags, seed=99)  # a fresh process: another global RNG
    saved.seek(0)
    resumed.load_state_dict(torch.load(saved, weights_only=False), strict=True)
    assert all(torch.equal(a, b) for a, b in zip(later, side_draws(resumed, tokens, 3), strict=True))
    fresh, _ = build(SMALL["transformer"], *flags)  # without the saved state: the first draws again
    assert not torch.equal(side_draws(fresh, tokens, 1)[0], later[0])


def test_the_shifts_follow_the_cells_seed_and_differ_between_the_sides():
    tokens = tokens_with_left_padding(bsz=16)
    draws = {seed: side_draws(build(SMALL["transformer"], "--encoder-pos", "shape", "--decoder-pos", "shape",
                                    "--seed", str(seed), seed=seed * 7)[0], tokens, 1)[0] for seed in (1, 2)}
    again = side_draws(build(SMALL["transformer"], "--encoder-pos", "shape", "--decoder-pos", "shape",
                             "--seed", "1")[0], tokens, 1)[0]
    assert torch.equal(draws[1], again)  # the seed decides, not the global RNG
    assert not torch.equal(draws[1], draws[2])
    encoder, decoder = draws[1].chunk(2)
    assert not torch.equal(encoder, decoder)


def test_a_state_dict_written_before_the_generator_was_saved_loads_strictly():
    model, _ = build(SMALL["fconv"], "--encoder-pos", "shape", "--decoder-pos", "cape")
    older = copy.deepcopy(without_generators(model.state_dict()))
    twin, _ = build(SMALL["fconv"], "--encoder-pos", "shape", "--decoder-pos", "cape")
    twin.load_state_dict(older, strict=True)
