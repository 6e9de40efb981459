"""``shape`` (Kiyono et al. 2021) and ``cape`` (Likhomanenko et al. 2021): at inference each is
``sinusoidal`` with the same weights (and CAPE the closed-form continuous sinusoid); in training
the positions each sequence was given are read back from the embeddings and checked against the
papers' rules: SHAPE one integer offset k in 0..K per sequence, CAPE (x + Delta + epsilon_i) *
lambda with each draw inside its range. Also what posenc-pe says of them."""

import math

import pytest
import torch

from fairseq_helpers import PAD, DummyTask, build, decoder_output, random_batch
from posenc.analysis.read.position_tables import extract_tables
from posenc.encodings.shifted import CapeEmbedding, ShiftedSinusoidalEmbedding
from posenc.encodings.sinusoidal import SinusoidalPositionalEmbedding, sinusoid_frequencies
from test_analysis_rebuild import save_like_fairseq

SMALL = {"fconv": "posenc_fconv_small", "transformer": "posenc_transformer_small"}
DIM = 32


def tokens_with_left_padding(bsz=300, t_len=9):
    """Real tokens (5) with the first sentences left-padded by up to 4."""
    tokens = torch.full((bsz, t_len), 5)
    for b in range(bsz):
        tokens[b, : b % 5] = PAD
    return tokens


@pytest.mark.parametrize("family", ["fconv", "transformer"])
@pytest.mark.parametrize("kind", ["shape", "cape"])
def test_at_inference_the_model_equals_sinusoidal_with_the_same_weights(family, kind):
    task = DummyTask()
    ours, _ = build(SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    sinusoidal, _ = build(SMALL[family], "--encoder-pos", "sinusoidal", "--decoder-pos", "sinusoidal", task=task)
    sinusoidal.load_state_dict(ours.state_dict(), strict=True)  # no position parameters in either
    batch = random_batch(task.source_dictionary, src_len=9)
    assert torch.allclose(decoder_output(ours, *batch), decoder_output(sinusoidal, *batch), atol=1e-6)
    # ...and in training mode they differ: the positions move.
    ours.train()
    src = batch[0]
    sinusoidal_rows = sinusoidal.encoder.embed_positions(src)
    assert not torch.allclose(ours.encoder.embed_positions(src), sinusoidal_rows, atol=1e-3)


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


def test_shape_shifts_each_sequence_by_one_whole_offset_from_0_to_K():
    K = 3
    shape = ShiftedSinusoidalEmbedding(DIM, PAD, max_shift=K).train()
    tokens = tokens_with_left_padding()
    torch.manual_seed(0)
    rows = shape(tokens).double()
    table = SinusoidalPositionalEmbedding(DIM, PAD, init_size=64).weights.double()
    real = tokens.ne(PAD)
    shifts = []
    for b in range(tokens.size(0)):
        n = int(real[b].sum())
        assert rows[b, ~real[b]].abs().sum() == 0  # pads get nothing
        found = [k for k in range(K + 1) if torch.allclose(rows[b, real[b]], table[PAD + 1 + k : PAD + 1 + k + n])]
        assert len(found) == 1, b  # the sinusoid's rows at p + k, for exactly one k in 0..K
        shifts.append(found[0])
    counts = torch.bincount(torch.tensor(shifts), minlength=K + 1)
    # U{0..K}: 300 draws, 75 expected per value; each within +-5 sd of Binomial(300, 1/4)
    assert ((counts - 75).abs() < 5 * math.sqrt(300 * 0.25 * 0.75)).all(), counts
    shape.eval()
    assert torch.allclose(shape(tokens).double()[real], table[(torch.cumsum(real, 1) + PAD)[real]])


@pytest.mark.parametrize("which", ["global_shift", "local_shift", "global_scaling"])
def test_cape_moves_positions_as_the_paper_says(which):
    a, b, c = 5.0, 0.5, 1.3
    settings = {"global_shift": dict(max_global_shift=a), "local_shift": dict(max_local_shift=b),
                "global_scaling": dict(max_global_scaling=c)}[which]
    cape = CapeEmbedding(DIM, PAD, **settings).train()
    tokens = tokens_with_left_padding()
    torch.manual_seed(1)
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
    ("shape", ["--shape-max-shift", "7"], {"shape_max_shift": 7}),
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
