"""posenc-pe sweep (every cell of a sweep beside its BLEU), posenc-pe bases, --base, and the
attention-logit proximity of a Transformer checkpoint against fairseq's own attention."""

import csv
import json
import math
import os

import numpy as np
import pytest
import torch

from fairseq_helpers import PAD, build
from pe_cli_helpers import run_cli
from posenc.analysis.measure.checkpoint import checkpoint_report
from posenc.analysis.measure.properties import gram
from posenc.analysis.measure.relative_linear import relative_linear_errors
from posenc.encodings.sinusoidal import sinusoid_frequencies, sinusoid_table
from test_analysis_rebuild import save_like_fairseq, train_fconv_steps

PNG = b"\x89PNG\r\n\x1a\n"


# --- attention logits of a real checkpoint, against fairseq's MultiheadAttention ---------------------------


def test_attention_logits_equal_fairseqs_own_attention_scores(tmp_path):
    model, args = build("posenc_transformer_small", "--encoder-pos", "learned", "--decoder-pos", "sinusoidal")
    with torch.no_grad():  # the bilinear term only: no biases in the reference either
        for side in (model.encoder, model.decoder):
            side.layers[0].self_attn.q_proj.bias.zero_()
            side.layers[0].self_attn.k_proj.bias.zero_()
    save_like_fairseq(tmp_path / "t.pt", model, args)
    report, extras = checkpoint_report(str(tmp_path / "t.pt"), max_len=24, run_probes=False)
    for side in ("encoder", "decoder"):
        table = extras[side]["table"]
        attn = getattr(model, side).layers[0].self_attn
        attn._set_skip_embed_dim_check()  # fairseq's fused path ignores before_softmax; its explicit one honours it
        with torch.no_grad():  # fairseq's scores before the softmax, (B*H, T, S), q already scaled
            scores, _ = attn(table.float()[:, None, :], table.float()[:, None, :], table.float()[:, None, :],
                             before_softmax=True)
        ours = extras[side]["attention_logits"]
        assert ours.shape == (4, 24, 24)
        assert np.allclose(ours, scores.double().numpy(), atol=1e-5)
        props = report["tables"][side]["attention_logit_properties"]
        assert props["heads"] == 4 and props["scaling"] == (args.encoder_embed_dim // 4) ** -0.5
        assert [h["head"] for h in props["per_head"]] == [0, 1, 2, 3]
        assert "head 2" in props["per_head"][2]["proximity"]
        # a random W_Q, W_K: neither symmetric nor the dot product's symmetry by construction
        assert all(abs(h["symmetry"]) < 0.99 for h in props["per_head"])
        assert report["tables"][side]["properties"]["symmetry_holds_by_construction"] is True
    assert (tmp_path / "t.pt").exists()


def test_checkpoint_markdown_names_each_proximity(tmp_path, capsys):
    model, args = build("posenc_transformer_small", "--encoder-pos", "learned", "--decoder-pos", "rope")
    save_like_fairseq(tmp_path / "t.pt", model, args)
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "t.pt"), "--out", str(tmp_path / "o"), "--max-len", "20",
                          "--no-probes"], capsys)
    assert rc == 0, err
    md = (tmp_path / "o" / "report.md").read_text()
    assert "dot product: symmetry | 1 (holds by construction)" in md
    assert "layer-0 attention logits: symmetry, per head" in md
    assert (tmp_path / "o" / "encoder_attention_logits.png").read_bytes()[:8] == PNG


# --- posenc-pe sweep ----------------------------------------------------------------------------------------

PLAN = """hydra:
  sweeper:
    params:
      placement: both,none
      seed: 1,2,3
  overrides:
    task: []
  job:
    config:
      override_dirname:
        exclude_keys: []
        item_sep: ','
        kv_sep: '='
model:
  name: fconv_small
  family: fconv
pe: learned
placement: both
"""


def record(cell, placement, seed, status="ok", bleu=None, error=""):
    return {"experiment": "table4", "model": "fconv_small", "data": "synthetic", "pe": "learned",
            "placement": placement, "encoder_pos": "learned" if placement == "both" else "none",
            "decoder_pos": "learned" if placement == "both" else "none", "seed": seed, "status": status,
            "error": error, "bleu": bleu, "valid_ppl": 1.5, "job_dir": str(cell)}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A sweep of 6 planned cells: two measured (learned; none), one failed without checkpoint,
    one ok whose checkpoint is gone, one torn result.json, one never reported."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "multirun.yaml").write_text(PLAN)

    def cell(name, rec=None, checkpoint=None):
        path = root / name
        (path / "checkpoints").mkdir(parents=True)
        if rec is not None:
            (path / "result.json").write_text(json.dumps(rec))
        if checkpoint is not None:
            model, args, opt = checkpoint
            save_like_fairseq(path / "checkpoints" / "checkpoint_best.pt", model, args,
                              last_optimizer_state=opt.state_dict() if opt else None)
        return path

    trained = train_fconv_steps(max_len=12)
    none_model, none_args = build("posenc_fconv_small", "--encoder-pos", "none", "--decoder-pos", "none")
    cell("placement=both,seed=1", record(root, "both", 1, bleu=80.5), trained)
    cell("placement=none,seed=1", record(root, "none", 1, bleu=79.0), (none_model, none_args, None))
    cell("placement=both,seed=2", record(root, "both", 2, status="failed", error="fairseq-train exited 1"))
    cell("placement=none,seed=2", record(root, "none", 2, bleu=81.0))
    (cell("placement=both,seed=3") / "result.json").write_text('{"status": "ok", "ble')
    return root, trained[0]


def test_sweep_lists_every_cell_beside_its_bleu(sweep_dir, tmp_path, capsys):
    root, model = sweep_dir
    out = tmp_path / "pe"
    rc, stdout, err = run_cli(["sweep", str(root), "--out", str(out), "--folds", "2"], capsys)
    assert rc == 1, err  # not every cell was measured: everything written, then a non-zero exit
    assert "6 cells, 2 ok and measured, 4 not" in stdout and err == ""
    rows = {r["cell"]: r for r in csv.DictReader((out / "sweep.csv").open())}
    assert sorted(rows) == sorted(f"placement={p},seed={s}" for p in ("both", "none") for s in (1, 2, 3))
    ok = rows["placement=both,seed=1"]
    assert ok["status"] == "ok" and float(ok["bleu"]) == 80.5 and ok["measured"] == "True"
    assert ok["enc_kind"] == "learned" and int(ok["enc_positions"]) == 12  # the positions training reached
    table = model.encoder.embed_positions.weight.detach().double()[PAD + 1 : PAD + 13]
    assert float(ok["enc_norm_mean"]) == pytest.approx(table.norm(dim=1).mean().item(), rel=1e-12)
    assert 0 <= float(ok["enc_dot_translation_invariance"]) <= 1 and ok["enc_abs_position_mae"] != ""
    assert rows["placement=none,seed=1"]["enc_kind"] == "none" and rows["placement=none,seed=1"]["measured"] == "True"
    assert (rows["placement=both,seed=2"]["status"] == "failed"
            and "fairseq-train exited 1" in rows["placement=both,seed=2"]["note"])
    assert "no checkpoints/checkpoint_best.pt" in rows["placement=none,seed=2"]["note"]
    assert rows["placement=both,seed=3"]["status"] == "unreadable"
    assert rows["placement=none,seed=3"]["status"] == "missing"
    md = (out / "sweep.md").read_text()
    for name in rows:
        assert f"`{name}`" in md
    assert "encoder init" in md and "N(0, 0.1) init" in md  # the yardstick of untrained tables
    report = json.loads((out / "report.json").read_text())
    assert set(report["cells"]) == {"placement=both,seed=1", "placement=none,seed=1"}
    for fig in ("sweep_properties.png", "sweep_cosine.png"):
        assert (out / fig).read_bytes()[:8] == PNG and fig in report["figures"]


def test_sweep_reads_nothing_but_records_and_the_cells_checkpoints(sweep_dir, tmp_path, capsys, monkeypatch):
    root, _ = sweep_dir
    opened = []
    real_load = torch.load

    def spy(path, *a, **kw):
        opened.append(os.path.realpath(str(path)))
        return real_load(path, *a, **kw)

    monkeypatch.setattr(torch, "load", spy)
    run_cli(["sweep", str(root), "--out", str(tmp_path / "pe"), "--no-probes"], capsys)
    assert sorted(opened) == sorted(os.path.realpath(str(root / c / "checkpoints" / "checkpoint_best.pt"))
                                    for c in ("placement=both,seed=1", "placement=none,seed=1"))


def test_sweep_bad_input_is_one_line(tmp_path, capsys):
    rc, _, err = run_cli(["sweep", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.strip() == f"posenc-pe: error: {tmp_path / 'nowhere'}: no such sweep directory"
    (tmp_path / "empty").mkdir()
    rc, _, err = run_cli(["sweep", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "no result.json" in err
    assert not (tmp_path / "o").exists()


# --- posenc-pe bases and --base -----------------------------------------------------------------------------


def test_bases_table_against_closed_form(tmp_path, capsys):
    d, n = 16, 64
    rc, stdout, err = run_cli(["bases", "--dim", str(d), "--max-len", str(n), "--bases", "10,10000", "--folds", "2",
                               "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    rows = list(csv.DictReader((tmp_path / "bases.csv").open()))
    assert [float(r["base"]) for r in rows] == [10.0, 10000.0]
    for r in rows:
        b = float(r["base"])
        assert float(r["wavelength_min"]) == pytest.approx(2 * math.pi)
        assert float(r["wavelength_max"]) == pytest.approx(2 * math.pi * b ** ((d - 2) / d))  # paper layout
        wavelengths = [2 * math.pi * b ** (2 * i / d) for i in range(d // 2)]
        assert int(r["pairs_longer_than_table"]) == sum(w > n for w in wavelengths)
        # how far f(m) = <PE_x, PE_x+m> falls, from the table's own Gram matrix at anchor 0
        f = gram(sinusoid_table(n, d, "paper", dtype=torch.float64, base=b))[0]
        rises = [m for m in range(n - 1) if f[m + 1] >= f[m]]
        assert int(r["monotone_up_to"]) == (rises[0] if rises else n - 1)
        rel = relative_linear_errors(sinusoid_table(n, d, "paper", dtype=torch.float32, base=b), "paper", base=b)
        assert float(r["relative_error_float32"]) == rel["max_error"] and rel["max_error"] < 1e-4
        assert int(r["relative_error_worst_k"]) == rel["worst_k"]
        assert r["absolute_position_mae"] != "" and r["relative_order_error"] != ""
    assert rows[0]["pairs_longer_than_table"] == "0" and int(rows[1]["pairs_longer_than_table"]) > 0
    assert ((tmp_path / "bases.png").read_bytes()[:8] == PNG
            and "![bases](bases.png)" in (tmp_path / "bases.md").read_text())


@pytest.mark.parametrize("argv, message", [
    (["bases", "--dim", "8", "--max-len", "10", "--bases", "10,1"],
     "--bases must be a finite number greater than 1, got 1"),
    (["bases", "--dim", "8", "--max-len", "10", "--bases", "10,x"], "--bases: 'x' is not a number"),
    (["bases", "--dim", "8", "--max-len", "10", "--bases", "10,10"], "--bases lists 10 twice"),
    (["sinusoidal", "--dim", "8", "--max-len", "10", "--base", "0.5"],
     "--base must be a finite number greater than 1, got 0.5"),
    (["sinusoidal", "--dim", "8", "--max-len", "10", "--base", "inf"],
     "--base must be a finite number greater than 1, got inf"),
])
def test_bad_bases_give_one_line(argv, message, tmp_path, capsys):
    rc, _, err = run_cli([*argv, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.splitlines() == [f"posenc-pe: error: {message}"]
    assert not (tmp_path / "o").exists()


def test_sinusoidal_base_option(tmp_path, capsys):
    d, b = 8, 100.0
    rc, _, err = run_cli(["sinusoidal", "--dim", str(d), "--max-len", "30", "--base", "100", "--no-probes",
                          "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["base"] == b and report["relative_linear_max_error"] < 1e-12
    paper = report["variants"]["paper"]
    assert paper["values"]["wavelength_max"] == pytest.approx(2 * math.pi * b ** ((d - 2) / d))
    assert report["variants"]["fairseq"]["values"]["wavelength_max"] == pytest.approx(2 * math.pi * b)
    assert paper["values"]["frequencies"] == pytest.approx(sinusoid_frequencies(d, "paper", torch.float64, b).tolist())
    assert report["symmetry_holds_by_construction"] is True and "by construction" in report["symmetry_note"]
    assert "base 100" in (tmp_path / "report.md").read_text()


def test_the_analysis_imports_neither_fairseq_nor_the_harness():
    """Imports point one way: the analysis reads tables, checkpoints and records."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import importlib, pkgutil, sys, posenc.analysis as pa\n"  # every module of every room
            "for m in pkgutil.walk_packages(pa.__path__, 'posenc.analysis.'): importlib.import_module(m.name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'fairseq' or m.startswith('posenc.harness') "
            "or m.startswith('posenc.fairseq_plugin'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
