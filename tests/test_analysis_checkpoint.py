"""posenc-pe on checkpoints: extraction from models trained inside the test, kinds from cfg/args,
and the one-line errors."""

import json
import math
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from pe_cli_helpers import run_cli
from posenc.analysis.read.fairseq_checkpoint import CheckpointError, load_checkpoint
from posenc.analysis.read.model_weights import token_embedding
from posenc.analysis.read.position_tables import extract_tables
from posenc.encodings import fconv_learned_positions, make_positions, sinusoid_table, transformer_learned_positions

PAD, D, MAXPOS, VOCAB = 1, 16, 24, 12


class ToyModel(nn.Module):
    """Encoder with a Transformer-style learned table, decoder with an fconv-style one (the two
    layouts), token embeddings, and a head that reads the position back."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.embed_tokens = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.encoder.embed_positions = transformer_learned_positions(MAXPOS, D, PAD)  # MAXPOS + 2 rows
        self.decoder = nn.Module()
        self.decoder.embed_tokens = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.decoder.embed_positions = fconv_learned_positions(MAXPOS + PAD + 1, D, PAD)  # same usable rows
        self.head = nn.Linear(D, MAXPOS)

    def forward(self, tokens):
        enc = self.encoder.embed_tokens(tokens) * math.sqrt(D) + self.encoder.embed_positions(tokens)
        dec = self.decoder.embed_tokens(tokens) + self.decoder.embed_positions(tokens)
        return self.head(enc + dec)


def train_toy(steps=30, seed=0):
    torch.manual_seed(seed)
    model = ToyModel()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    init = model.encoder.embed_positions.weight.detach().clone()
    for _ in range(steps):
        tokens = torch.randint(PAD + 1, VOCAB, (8, MAXPOS))
        tokens[:4, MAXPOS // 2 :] = PAD  # some right padding
        target = make_positions(tokens, PAD) - PAD - 1  # 0-based position of each real token
        logits = model(tokens)
        mask = tokens.ne(PAD)
        loss = nn.functional.cross_entropy(logits[mask], target[mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert not torch.equal(init, model.encoder.embed_positions.weight)  # training moved the table
    return model


@pytest.fixture(scope="module")
def toy_checkpoint(tmp_path_factory):
    model = train_toy()
    path = tmp_path_factory.mktemp("ckpt") / "checkpoint_toy.pt"
    cfg = {"model": Namespace(arch="posenc_transformer_small", encoder_pos="learned", decoder_pos="learned",
                              encoder_embed_dim=D, decoder_embed_dim=D, max_source_positions=MAXPOS)}
    torch.save({"model": model.state_dict(), "cfg": cfg, "optimizer_history": []}, path)
    return path, model


def test_extraction_equals_the_models_own_parameters(toy_checkpoint):
    path, model = toy_checkpoint
    tables = extract_tables(load_checkpoint(str(path)))
    enc, dec = tables["encoder"], tables["decoder"]
    assert enc.kind == dec.kind == "learned"
    assert enc.padding_idx == dec.padding_idx == PAD and enc.first_row == PAD + 1
    assert torch.equal(enc.table, model.encoder.embed_positions.weight.detach().double()[PAD + 1 :])
    assert torch.equal(dec.table, model.decoder.embed_positions.weight.detach().double()[PAD + 1 :])
    assert enc.table.shape == dec.table.shape == (MAXPOS, D)
    # position p is what the model adds to the p-th token (0-based)
    tokens = torch.full((1, 5), 7)
    added = model.encoder.embed_positions(tokens)[0].detach().double()
    assert torch.equal(added, enc.table[:5])
    weight, scale, _ = token_embedding(load_checkpoint(str(path)), "encoder")
    assert scale == math.sqrt(D) and torch.equal(weight, model.encoder.embed_tokens.weight.detach().double())


def test_max_len_and_padding_idx_options(toy_checkpoint):
    path, model = toy_checkpoint
    ckpt = load_checkpoint(str(path))
    short = extract_tables(ckpt, max_len=7)["encoder"]
    assert torch.equal(short.table, model.encoder.embed_positions.weight.detach().double()[2:9])
    forced = extract_tables(ckpt, padding_idx=0)["encoder"]
    assert torch.equal(forced.table, model.encoder.embed_positions.weight.detach().double()[1:])


@pytest.mark.parametrize("style", ["namespace_args", "dictconfig", "plain_dict"])
def test_kinds_from_cfg_or_args_and_sinusoid_rebuilt(style):
    from omegaconf import OmegaConf

    state = {"encoder.embed_tokens.weight": torch.randn(VOCAB, D), "decoder.embed_tokens.weight": torch.randn(VOCAB, D),
             "encoder.layers.0.self_attn.k_proj.weight": torch.zeros(D, D)}
    margs = {"arch": "transformer", "encoder_embed_dim": D, "decoder_embed_dim": D, "max_source_positions": 30,
             "max_target_positions": 20, "decoder_learned_pos": False}
    if style == "namespace_args":
        ckpt = {"model": state, "args": Namespace(**margs)}
    elif style == "dictconfig":
        ckpt = {"model": state, "cfg": OmegaConf.create({"model": margs})}
    else:
        ckpt = {"model": state, "cfg": {"model": margs}}
    tables = extract_tables(ckpt)
    assert tables["encoder"].kind == tables["decoder"].kind == "sinusoidal"
    assert tables["encoder"].table.shape == (30, D) and tables["decoder"].table.shape == (20, D)
    # fairseq's layout and offset: the first token gets the sinusoid row padding_idx + 1
    assert torch.allclose(tables["encoder"].table, sinusoid_table(32, D, "fairseq", dtype=torch.float64)[2:])


def test_sinusoid_rebuilt_like_stock_fairseq():
    fairseq_modules = pytest.importorskip("fairseq.modules")
    ckpt = {"model": {"encoder.embed_tokens.weight": torch.randn(VOCAB, D)},
            "cfg": {"model": {"arch": "transformer", "encoder_embed_dim": D, "max_source_positions": 40,
                              "decoder_pos": "none"}}}
    tables = extract_tables(ckpt)
    stock = fairseq_modules.SinusoidalPositionalEmbedding(D, PAD, init_size=64)
    tokens = torch.full((1, 40), 5)
    # fairseq computes its angles in float32 (up to ~4e-6 off at angle 42); a wrong layout or row
    # offset would be off by O(1)
    assert torch.allclose(tables["encoder"].table.float(), stock(tokens)[0], atol=1e-5)
    assert tables["decoder"].kind == "none" and tables["decoder"].table is None


@pytest.mark.slow
def test_stock_fairseq_fconv_checkpoint(tmp_path, capsys):
    fconv = pytest.importorskip("fairseq.models.fconv")
    from fairseq.data import Dictionary

    torch.manual_seed(0)
    vocab = Dictionary()
    for w in "abcdefgh":
        vocab.add_symbol(w)
    enc = fconv.FConvEncoder(vocab, embed_dim=D, max_positions=32, convolutions=((D, 3),) * 2, dropout=0.0)
    dec = fconv.FConvDecoder(vocab, embed_dim=D, out_embed_dim=D, max_positions=32, convolutions=((D, 3),) * 2,
                             attention=True, dropout=0.0)
    model = fconv.FConvModel(enc, dec)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(5):  # copy task
        src = torch.randint(vocab.nspecial, len(vocab), (4, 10))
        prev = torch.cat([torch.full((4, 1), vocab.eos()), src[:, :-1]], 1)
        out, _ = model(src, torch.full((4,), 10), prev)
        loss = nn.functional.cross_entropy(out.reshape(-1, out.size(-1)), src.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path / "fconv.pt"
    torch.save({"model": model.state_dict(), "cfg": {"model": Namespace(arch="fconv", encoder_embed_dim=D)}}, path)
    tables = extract_tables(load_checkpoint(str(path)))
    for side in ("encoder", "decoder"):
        stock_weight = getattr(model, side).embed_positions.weight.detach().double()
        assert tables[side].kind == "learned" and tables[side].padding_idx == vocab.pad()
        assert torch.equal(tables[side].table, stock_weight[vocab.pad() + 1 :])
    rc, out, err = run_cli(["checkpoint", str(path), "--out", str(tmp_path / "out")], capsys)
    assert rc == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["family"] == "fconv" and report["tables"]["decoder"]["scale"]["trained_tokens"]["embed_scale"] == 1.0


def test_cli_checkpoint_writes_report(toy_checkpoint, tmp_path, capsys):
    path, model = toy_checkpoint
    out = tmp_path / "out"
    rc, stdout, err = run_cli(["checkpoint", str(path), "--out", str(out)], capsys)
    assert rc == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["mode"] == "checkpoint" and report["kinds"] == {"encoder": "learned", "decoder": "learned"}
    enc = report["tables"]["encoder"]
    table = model.encoder.embed_positions.weight.detach().double()[2:]
    norms = table.norm(dim=1)
    assert math.isclose(enc["scale"]["norm_mean"], float(norms.mean()), rel_tol=1e-12)
    tok = model.encoder.embed_tokens.weight.detach().double()
    tok_norm = float(torch.cat([tok[:1], tok[2:]]).norm(dim=1).mean()) * math.sqrt(D)
    assert math.isclose(enc["scale"]["trained_tokens"]["pe_to_token_norm_ratio"], float(norms.mean()) / tok_norm,
                        rel_tol=1e-9)
    for key in ("translation_invariance", "monotonicity", "symmetry"):
        assert key in enc["properties"]
    assert {"absolute_position", "relative_order"} <= set(enc["probes"])
    assert "rowwise_cosine_mean" in report["comparison"]
    for name in ("encoder_cosine.png", "decoder_cosine.png", "encoder_heatmap.png", "proximity.png", "scale.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert name in report["figures"]
    assert "encoder_cosine.png" in (out / "report.md").read_text()


def test_cli_checkpoint_errors(tmp_path, capsys):
    missing = tmp_path / "nope.pt"
    rc, _, err = run_cli(["checkpoint", str(missing), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.strip() == f"posenc-pe: error: no such checkpoint: {missing}"

    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    rc, _, err = run_cli(["checkpoint", str(text), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "cannot read" in err and "Traceback" not in err

    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    rc, _, err = run_cli(["checkpoint", str(other), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "is not a fairseq checkpoint" in err and err.count("\n") == 1

    empty = tmp_path / "empty.pt"
    torch.save({"model": {"encoder.convolutions.0.weight": torch.zeros(2)}, "cfg": {"model": {"arch": "fconv"}}}, empty)
    rc, _, err = run_cli(["checkpoint", str(empty), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1
    assert "encoder.embed_positions.weight" in err and "decoder.embed_positions.weight" in err
    assert not (tmp_path / "o").exists()  # nothing written on failure

    with pytest.raises(CheckpointError):
        load_checkpoint(str(missing))


def test_console_script_error_has_no_traceback(tmp_path):
    # the real entry point, in a fresh interpreter: one line on stderr, exit status 2
    code = "import sys; from posenc.analysis.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, "checkpoint", str(tmp_path / "missing.pt"), "--out",
                           str(tmp_path)], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"posenc-pe: error: no such checkpoint: {tmp_path / 'missing.pt'}"]
