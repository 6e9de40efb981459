"""posenc-pe on relative attention biases (t5, alibi): the bias per head against the distance
key - query, checked against ALiBi's closed form, T5's bucket rule worked out by hand, and the
scores fairseq's own attention layers compute; the per-head summary; the sweep's rows; rope."""

import csv
import json

import pytest
import torch

from fairseq_helpers import build
from pe_cli_helpers import run_cli
from posenc.analysis.measure.bias_locality import head_summary
from posenc.analysis.measure.checkpoint import checkpoint_report
from test_analysis_rebuild import save_like_fairseq
from test_analysis_sweep import record

PNG = b"\x89PNG\r\n\x1a\n"

# T5's rule (Raffel et al.; mesh-tensorflow's _relative_position_bucket), worked out by hand for 32
# buckets and max_distance 128, at relative positions key - query:
# bidirectional: 16 buckets per direction (keys after the query: +16), exact below 8, then
# 8 + floor(log(|d|/8) / log(128/8) * 8), every |d| >= 128 in the last bucket of its direction.
BIDIRECTIONAL_BUCKETS = {0: 0, -1: 1, 1: 17, -7: 7, 7: 23, -8: 8, 8: 24,
                         -20: 10, 20: 26,    # log(2.5)/log(16) * 8 = 2.64
                         -50: 13, 50: 29,    # log(6.25)/log(16) * 8 = 5.29
                         -127: 15,           # 7.98
                         -128: 15, -300: 15, 128: 31, 300: 31}
# causal: all 32 buckets for keys at or before the query, exact below 16, then
# 16 + floor(log(|d|/16) / log(128/16) * 16).
CAUSAL_BUCKETS = {0: 0, -1: 1, -15: 15, -16: 16,
                  -40: 23,   # log(2.5)/log(8) * 16 = 7.05
                  -100: 30,  # log(6.25)/log(8) * 16 = 14.1
                  -128: 31, -300: 31}


def _at(bias: dict, head: int, d: int) -> float:
    return bias["bias"][head][bias["distances"].index(d)]


def test_alibi_bias_is_minus_the_papers_slope_times_the_distance(tmp_path):
    path = tmp_path / "alibi.pt"
    margs = {"arch": "posenc_transformer_small", "encoder_pos": "alibi", "decoder_pos": "alibi",
             "encoder_attention_heads": 8, "decoder_attention_heads": 8}
    torch.save({"model": {}, "cfg": {"model": margs}}, path)
    report, _ = checkpoint_report(str(path), max_len=41, run_probes=False)
    slopes = [2.0 ** -(h + 1) for h in range(8)]  # Press et al. (2022), H = 8: 1/2, 1/4, ..., 1/256
    enc, dec = report["tables"]["encoder"]["relative_bias"], report["tables"]["decoder"]["relative_bias"]
    assert enc["slopes"] == slopes and dec["slopes"] == slopes
    assert enc["distances"] == list(range(-40, 41)) and dec["distances"] == list(range(-40, 1))
    for bias in (enc, dec):
        assert bias["learned"] is False and "no learned parameters" in bias["fixed"]
        for h, m in enumerate(slopes):
            assert [_at(bias, h, d) for d in bias["distances"]] == [-m * abs(d) for d in bias["distances"]]
            head = bias["per_head"][h]
            assert head["slope"] == m and head["at_0"] == 0.0 and head["at_minus_1"] == -m
            assert head["at_far_back"] == -40 * m and head["locality"] == "local" and head["peak_distance"] == 0
        assert bias["locality_counts"]["local"] == 8
    assert enc["per_head"][0]["at_plus_1"] == -0.5 and dec["per_head"][0]["at_plus_1"] is None  # causal: none after


def hand_set_t5(tmp_path, name="t5.pt"):
    """A real posenc_transformer_small with t5 on both sides and hand-set bias tables: bucket b,
    head h holds 100 h + b, except head 0, which falls with the distance within a direction."""
    model, args = build("posenc_transformer_small", "--encoder-pos", "t5", "--decoder-pos", "t5")
    with torch.no_grad():
        for side in (model.encoder, model.decoder):
            w = side.relative_attention_bias.weight
            buckets, heads = w.shape
            w.copy_(100.0 * torch.arange(heads)[None, :] + torch.arange(buckets)[:, None])
            per_direction = buckets // 2 if side is model.encoder else buckets
            w[:, 0] = -(torch.arange(buckets) % per_direction).float()
    save_like_fairseq(tmp_path / name, model, args)
    return tmp_path / name, model


def test_t5_gives_back_the_weight_at_the_bucket_of_each_distance(tmp_path):
    path, model = hand_set_t5(tmp_path)
    report, _ = checkpoint_report(str(path), max_len=301, run_probes=False)
    for side, expected in (("encoder", BIDIRECTIONAL_BUCKETS), ("decoder", CAUSAL_BUCKETS)):
        bias = report["tables"][side]["relative_bias"]
        weight = getattr(model, side).relative_attention_bias.weight.detach()
        assert bias["kind"] == "t5" and bias["learned"] and bias["heads"] == 4
        assert bias["settings"]["num_buckets"] == 32 and bias["settings"]["max_distance"] == 128
        assert "max_distance" in bias["settings"]["defaulted"]
        for d, b in expected.items():
            assert bias["buckets"][bias["distances"].index(d)] == b, (side, d)
            for h in range(4):
                assert _at(bias, h, d) == float(weight[b, h]), (side, d, h)
        # head 0 falls with |d| in both directions; the others (100 h + b) rise
        assert bias["per_head"][0]["locality"] == "local"
        assert [h["locality"] for h in bias["per_head"][1:]] == ["anti-local"] * 3
        assert bias["weight"]["init_std"] == pytest.approx(128 ** -0.5)
    assert report["tables"]["decoder"]["relative_bias"]["distances"] == list(range(-300, 1))


def test_the_bias_is_what_the_models_attention_adds_to_its_logits(tmp_path):
    """With layer 0's query projection zeroed, fairseq's scores before the softmax are the bias
    alone: score(h, i, j) must be the reported bias of head h at distance j - i."""
    model, args = build("posenc_transformer_small", "--encoder-pos", "t5", "--decoder-pos", "alibi")
    with torch.no_grad():
        model.encoder.relative_attention_bias.weight.normal_(std=1.0)
    save_like_fairseq(tmp_path / "m.pt", model, args)
    report, _ = checkpoint_report(str(tmp_path / "m.pt"), max_len=30, run_probes=False)
    t = 30
    for side in ("encoder", "decoder"):
        attn = getattr(model, side).layers[0].self_attn
        with torch.no_grad():
            attn.q_proj.weight.zero_()
            attn.q_proj.bias.zero_()
            x = torch.randn(t, 1, args.encoder_embed_dim)
            scores, _ = attn(x, x, x, before_softmax=True)  # (B*H, T, S), B = 1
        bias = report["tables"][side]["relative_bias"]
        causal = side == "decoder"
        for h in range(4):
            for i in range(t):
                for j in range(i + 1 if causal else t):
                    assert _at(bias, h, j - i) == pytest.approx(float(scores[h, i, j]), abs=1e-6), (side, h, i, j)
    assert report["tables"]["decoder"]["relative_bias"]["slopes"] == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8]


@pytest.mark.parametrize("values, locality, peak, falls", [
    ([-4, -3, -2, -1, 0, -1, -2, -3, -4], "local", 0, (True, True)),
    ([4, 3, 2, 1, 0, 1, 2, 3, 4], "anti-local", -4, (False, False)),
    ([-2, -1, -1, 0, 0, 0, -1, -1, -2], "local", 0, (True, True)),  # ties, as T5's buckets make: nearest wins
    ([0, 0, 0, 1, 0, 1, 0, 0, 0], "mixed", -1, (False, False)),  # a tie at -1 and +1: the key before wins
    ([0, 0, 0, 0, 3, 1, 2, 0, 0], "mixed", 0, (True, False)),   # falls backward only
    ([2.0] * 9, "flat", 0, (True, True)),
])
def test_head_summary_on_hand_built_profiles(values, locality, peak, falls):
    distances = torch.arange(-4, 5)
    s = head_summary(distances, torch.tensor(values, dtype=torch.float64))
    assert s["locality"] == locality and s["peak_distance"] == peak
    assert (s["falls_back"], s["falls_forward"]) == falls
    assert (s["at_0"], s["at_minus_1"], s["at_plus_1"]) == (values[4], values[3], values[5])
    assert (s["at_far_back"], s["at_far_forward"]) == (values[0], values[8])


def test_cli_checkpoint_reports_and_draws_the_biases(tmp_path, capsys):
    path, model = hand_set_t5(tmp_path)
    out = tmp_path / "out"
    rc, stdout, err = run_cli(["checkpoint", str(path), "--out", str(out), "--no-probes"], capsys)
    assert rc == 0, err
    assert "encoder t5, decoder t5" in stdout
    report = json.loads((out / "report.json").read_text())
    enc = report["tables"]["encoder"]["relative_bias"]
    assert enc["distances"] == list(range(-128, 129))  # default range: T5's max_distance
    assert _at(enc, 2, -3) == float(model.encoder.relative_attention_bias.weight.detach()[3, 2])
    assert (out / "relative_bias.png").read_bytes()[:8] == PNG and "relative_bias.png" in report["figures"]
    md = (out / "report.md").read_text()
    assert "### encoder: t5" in md and "| head | b(0) | b(-1) | b(+1) | b(-128) | b(+128) |" in md
    assert "| 0 | 0 | -1 | -1 | -15 | -15 | 0 |" in md  # head 0: -(bucket within its direction)
    assert "max_distance is not recorded" in md


def test_cli_checkpoint_alibi_says_fixed_and_shows_the_slopes(tmp_path, capsys):
    model, args = build("posenc_transformer_small", "--encoder-pos", "learned", "--decoder-pos", "alibi")
    save_like_fairseq(tmp_path / "m.pt", model, args)
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "m.pt"), "--out", str(tmp_path / "o"), "--no-probes",
                          "--max-len", "16"], capsys)
    assert rc == 0, err
    md = (tmp_path / "o" / "report.md").read_text()
    assert "ALiBi, fixed: no learned parameters" in md and "slopes 0.25, 0.0625, 0.01562, 0.003906" in md
    assert "## Position tables" in md  # the learned encoder table is still measured
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["tables"]["encoder"]["positions"] == 16 and report["tables"]["decoder"]["relative_bias"]["far"] == 15


def test_nothing_to_analyse_is_one_line(tmp_path, capsys):
    model, args = build("posenc_transformer_small", "--encoder-pos", "rope", "--decoder-pos", "rope")
    save_like_fairseq(tmp_path / "rope.pt", model, args)
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "rope.pt"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "found encoder: rope, decoder: rope" in err and "rope rotates queries and keys" in err

    margs = {"arch": "posenc_transformer_small", "encoder_pos": "alibi", "decoder_pos": "none"}
    torch.save({"model": {}, "cfg": {"model": margs}}, tmp_path / "noheads.pt")
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "noheads.pt"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1
    assert "encoder: alibi (alibi, but encoder_attention_heads is not recorded" in err
    assert not (tmp_path / "o").exists()


def test_sweep_lists_bias_cells_beside_their_bleu_and_notes_rope(tmp_path, capsys):
    root = tmp_path / "sweep"
    t5_path, t5_model = hand_set_t5(tmp_path)
    cells = {"pe=t5": (t5_path, 71.0), "pe=alibi": (("alibi", "alibi"), 72.0), "pe=rope": (("rope", "rope"), 73.0)}
    for name, (source, bleu) in cells.items():
        (root / name / "checkpoints").mkdir(parents=True)
        target = root / name / "checkpoints" / "checkpoint_best.pt"
        if isinstance(source, tuple):
            model, args = build("posenc_transformer_small", "--encoder-pos", source[0], "--decoder-pos", source[1])
            save_like_fairseq(target, model, args)
        else:
            target.write_bytes(source.read_bytes())
        (root / name / "result.json").write_text(json.dumps({**record(root / name, "both", 1, bleu=bleu),
                                                             "pe": name[3:]}))
    out = tmp_path / "pe"
    rc, stdout, err = run_cli(["sweep", str(root), "--out", str(out), "--no-probes"], capsys)
    assert rc == 0, err + stdout  # no cell counts as a failure
    assert "3 cells, 3 ok and measured" in stdout
    rows = {r["cell"]: r for r in csv.DictReader((out / "sweep.csv").open())}
    t5 = rows["pe=t5"]
    assert float(t5["bleu"]) == 71.0 and t5["enc_kind"] == "t5" and int(t5["enc_bias_heads"]) == 4
    weight = t5_model.encoder.relative_attention_bias.weight.detach()
    assert float(t5["enc_bias_at_0_mean"]) == pytest.approx(float(weight[0].double().mean()))
    assert (int(t5["enc_bias_local_heads"]) == 1
            and t5["enc_bias_summary"].startswith("t5, 4 heads: 1 local, 3 anti-local"))
    alibi = rows["pe=alibi"]
    assert int(alibi["dec_bias_local_heads"]) == 4 and "alibi (fixed)" in alibi["dec_bias_summary"]
    assert float(alibi["dec_bias_at_far_back_mean"]) == pytest.approx(
        -128 * sum(2.0 ** -k for k in (2, 4, 6, 8)) / 4)
    rope = rows["pe=rope"]
    assert rope["measured"] == "True" and rope["enc_bias_summary"] == ""
    assert "encoder: rope rotates queries and keys" in rope["note"]
    md = (out / "sweep.md").read_text()
    assert "enc: relative bias" in md and "alibi (fixed), 4 heads: 4 local" in md
