"""posenc-pe checkpoint rebuilds a sinusoid exactly as the model used it (scale, base, variant
recorded by the plugin; the plugin's defaults for older checkpoints), and finds the positions
training reached in a learned table."""

import json
import math

import pytest
import torch

from fairseq_helpers import PAD, DummyTask, build
from fairseq_tools import train
from pe_cli_helpers import run_cli
from posenc.analysis.read.fairseq_checkpoint import load_checkpoint
from posenc.analysis.read.optimizer_state import optimizer_states, trained_positions
from posenc.analysis.read.position_tables import extract_tables

NON_DEFAULT = ("--sinusoidal-scale", "0.37", "--sinusoidal-base", "500", "--sinusoidal-variant", "paper")


def position_output(model, side, n):
    """What the model adds to the first ``n`` tokens of an unpadded sentence, float64."""
    tokens = torch.full((1, n), 5)
    with torch.no_grad():
        return getattr(model, side).embed_positions(tokens)[0].double()


def save_like_fairseq(path, model, args, **extra):
    """The parts of fairseq's checkpoint the analysis reads: the args under cfg["model"] (a
    Namespace, as fairseq keeps it for these models) and the state dict."""
    torch.save({"args": None, "cfg": {"model": args}, "model": model.state_dict(), **extra}, path)
    return load_checkpoint(str(path))


@pytest.mark.parametrize("flags", [(), NON_DEFAULT], ids=["default-scale", "non-default"])
def test_fconv_sinusoid_rebuilt_exactly_as_the_model_adds_it(tmp_path, flags):
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", "--decoder-pos", "sinusoidal", *flags)
    ckpt = save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    tables = extract_tables(ckpt)
    for side in ("encoder", "decoder"):
        t = tables[side]
        n = t.table.size(0)
        assert n == args.max_source_positions - PAD - 1  # every position the model serves
        assert torch.equal(t.table, position_output(model, side, n))  # bit for bit
        assert t.settings["defaulted"] == []
    expected_scale = 0.37 if flags else 0.1 * math.sqrt(2)
    assert tables["encoder"].settings["scale"] == pytest.approx(expected_scale, rel=1e-15)
    # and the scale is really in there: norm 0.1*sqrt(D), the learned table's initial norm
    norms = tables["encoder"].table.norm(dim=1)
    if not flags:
        assert norms.mean().item() == pytest.approx(0.1 * math.sqrt(args.encoder_embed_dim), rel=1e-5)


def test_checkpoint_report_gives_the_norm_the_model_really_adds(tmp_path, capsys):
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", "--decoder-pos", "learned")
    save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "ckpt.pt"), "--out", str(tmp_path / "out"), "--no-probes"],
                         capsys)
    assert rc == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    enc = report["tables"]["encoder"]
    added = position_output(model, "encoder", enc["positions"])
    assert enc["scale"]["norm_mean"] == pytest.approx(added.norm(dim=1).mean().item(), rel=1e-12)
    assert enc["settings"]["scale"] == pytest.approx(0.1 * math.sqrt(2)) and enc["settings"]["base"] == 10000.0
    assert "fconv has no self-attention" not in json.dumps(report)  # nothing invented for fconv
    assert "attention_logit_properties" not in enc and "self-attention" in enc["attention_logit_properties_absent"]


def test_old_checkpoints_without_recorded_settings_use_the_plugins_defaults(tmp_path):
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", "--decoder-pos", "none")
    for name in ("sinusoidal_variant", "sinusoidal_base"):
        delattr(args, name)
    args.sinusoidal_scale = None  # what the plugin recorded before it resolved the scale
    tables = extract_tables(save_like_fairseq(tmp_path / "old.pt", model, args))
    enc = tables["encoder"]
    assert torch.equal(enc.table, position_output(model, "encoder", enc.table.size(0)))
    assert sorted(enc.settings["defaulted"]) == ["sinusoidal_base", "sinusoidal_scale", "sinusoidal_variant"]
    assert any("defaults" in note for note in enc.notes)


def test_recorded_settings_matter(tmp_path):
    """A non-default model whose settings were lost is rebuilt with the defaults, and then the
    rows differ: the rebuild really reads the recorded values."""
    model, args = build("posenc_fconv_small", "--encoder-pos", "sinusoidal", *NON_DEFAULT)
    args.sinusoidal_scale = args.sinusoidal_base = args.sinusoidal_variant = None
    table = extract_tables(save_like_fairseq(tmp_path / "lost.pt", model, args))["encoder"].table
    assert not torch.allclose(table, position_output(model, "encoder", table.size(0)), atol=1e-3)


def test_transformer_sinusoid_rebuilt_exactly(tmp_path):
    model, args = build("posenc_transformer_small", "--sinusoidal-base", "2000")
    tables = extract_tables(save_like_fairseq(tmp_path / "t.pt", model, args))
    for side in ("encoder", "decoder"):
        n = tables[side].table.size(0)
        assert n == args.max_source_positions
        assert torch.equal(tables[side].table, position_output(model, side, n))
        assert tables[side].settings["scale"] == 1.0 and tables[side].settings["base"] == 2000.0


# --- the positions training reached -------------------------------------------------------------------------


def train_fconv_steps(max_len, steps=3, seed=0):
    """A few Adam steps of a learned-position fconv on sentences of at most ``max_len`` tokens."""
    task = DummyTask()
    model, args = build("posenc_fconv_small", task=task, seed=seed)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    d = task.source_dictionary
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        lengths = torch.randint(2, max_len + 1, (4,), generator=g)
        lengths[0] = max_len
        src = torch.randint(d.nspecial, len(d), (4, max_len), generator=g)
        for i, n in enumerate(lengths.tolist()):
            src[i, : max_len - n] = PAD  # left padding, as fairseq's source batches
        prev = src.flip(1)  # right padded
        out, _ = model(src, lengths, prev)
        loss = out.logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), args, opt


def test_trained_positions_from_the_optimizer_state(tmp_path):
    model, args, opt = train_fconv_steps(max_len=11)
    ckpt = save_like_fairseq(tmp_path / "trained.pt", model, args, last_optimizer_state=opt.state_dict())
    states, why = optimizer_states(ckpt)
    assert states is not None, why
    assert "decoder.version" not in states  # a buffer, skipped
    assert trained_positions(ckpt, "encoder.embed_positions.weight", PAD)[0] == 11
    assert trained_positions(ckpt, "decoder.embed_positions.weight", PAD)[0] == 11
    tables = extract_tables(ckpt)
    assert tables["encoder"].trained_positions == 11 and tables["encoder"].table.size(0) == 11
    assert torch.equal(tables["encoder"].table,
                       model.encoder.embed_positions.weight.detach().double()[PAD + 1 : PAD + 12])
    # an explicit --max-len wins
    assert extract_tables(ckpt, max_len=30)["encoder"].table.size(0) == 30


def test_without_a_usable_optimizer_state_every_row_is_analysed(tmp_path):
    model, args, opt = train_fconv_steps(max_len=6, steps=1)
    plain = save_like_fairseq(tmp_path / "plain.pt", model, args)
    assert trained_positions(plain, "encoder.embed_positions.weight", PAD) == (
        None, "the checkpoint keeps no optimizer state")
    assert extract_tables(plain)["encoder"].table.size(0) == args.max_source_positions - PAD - 1
    state = opt.state_dict()  # a flattened state (as under --fp16): cannot be lined up
    flat = {"state": {0: {"exp_avg_sq": torch.ones(sum(p.numel() for p in model.parameters()))}},
            "param_groups": [{"params": [0]}]}
    ckpt = save_like_fairseq(tmp_path / "flat.pt", model, args, last_optimizer_state=flat)
    length, why = trained_positions(ckpt, "encoder.embed_positions.weight", PAD)
    assert length is None and "line up" in why
    assert state["state"]  # the per-parameter state was there to begin with


@pytest.mark.slow
@pytest.mark.parametrize("flags", [(), NON_DEFAULT], ids=["default-scale", "non-default"])
def test_fairseq_train_checkpoint_rebuilds_exactly(reversal_corpus, tmp_path, monkeypatch, flags):
    """Through fairseq's own training and checkpoint saving and loading."""
    from fairseq import checkpoint_utils

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # fairseq's checkpoints hold a Namespace
    train(reversal_corpus, tmp_path / "ckpt", "posenc_fconv_small", "--encoder-pos", "sinusoidal",
          "--decoder-pos", "sinusoidal", *flags, cwd=tmp_path)
    path = tmp_path / "ckpt" / "checkpoint_last.pt"
    ckpt = load_checkpoint(str(path))
    saved = ckpt["cfg"]["model"]
    assert saved.sinusoidal_scale == pytest.approx(0.37 if flags else 0.1 * math.sqrt(2), rel=1e-15)
    assert saved.sinusoidal_base == (500.0 if flags else 10000.0)
    models, _ = checkpoint_utils.load_model_ensemble([str(path)])
    model = models[0].eval()
    tables = extract_tables(ckpt)
    for side in ("encoder", "decoder"):
        n = tables[side].table.size(0)
        assert tables[side].settings["defaulted"] == []
        assert torch.equal(tables[side].table, position_output(model, side, n))
