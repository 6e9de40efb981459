"""``shaw`` (Shaw et al. 2018) against a direct implementation of the paper's equations, written
out here without the module: eq. 3-4 with a_ij = w_clip(j-i, k) (eq. 5-6), per head, on small
tensors, with and without padding, causal and not, full and incremental; its parameters; fconv's
refusal; what posenc-pe reads of it."""

import json

import pytest
import torch
from fairseq.modules import MultiheadAttention

from fairseq_helpers import DummyTask, build, decoder_output, parse_args, random_batch
from pe_cli_helpers import run_cli
from posenc.analysis.measure.checkpoint import checkpoint_report
from posenc.encodings.shaw import ShawRelativePositions
from posenc.fairseq_plugin.positional_attention import PositionalSelfAttention
from test_analysis_rebuild import save_like_fairseq

EMBED, HEADS, K = 16, 4, 2  # k = 2 < the lengths below, so clipping is exercised


def shaw_layer(seed=0, k=K, heads="shared"):
    torch.manual_seed(seed)
    stock = MultiheadAttention(EMBED, HEADS, self_attention=True)
    with torch.no_grad():  # nonzero biases and tables, so a dropped term would show
        for proj in (stock.q_proj, stock.k_proj, stock.v_proj, stock.out_proj):
            proj.bias.normal_()
    relative = ShawRelativePositions(EMBED // HEADS, k, heads, HEADS)
    with torch.no_grad():
        relative.keys.weight.normal_()
        relative.values.weight.normal_()
    return PositionalSelfAttention.from_attention(stock, "shaw", relative=relative).eval()


def paper_attention(layer, x, causal=False):
    """Shaw et al. eq. 3-4 for one unpadded sentence ``x`` ``(T, C)``, loop over heads and pairs."""
    t_len, dh, k = x.size(0), layer.head_dim, layer.relative.max_distance
    w_k, w_v = layer.relative.keys.weight.double(), layer.relative.values.weight.double()
    x = x.double()

    def proj(linear):
        return x @ linear.weight.double().T + linear.bias.double()

    q, key, v = proj(layer.q_proj), proj(layer.k_proj), proj(layer.v_proj)
    heads = []
    for h in range(HEADS):
        cols = slice(h * dh, (h + 1) * dh)
        own = cols if layer.relative.heads == "per_head" else slice(0, dh)  # head h's vectors, or the shared ones
        z = torch.zeros(t_len, dh, dtype=torch.float64)
        for i in range(t_len):
            keys = range(i + 1) if causal else range(t_len)
            a = {j: max(-k, min(k, j - i)) + k for j in keys}  # clip(j - i, k), as a row of w
            e = torch.stack([q[i, cols] @ (key[j, cols] + w_k[a[j], own]) / dh ** 0.5 for j in keys])
            alpha = torch.softmax(e, dim=0)
            z[i] = sum(alpha[n] * (v[j, cols] + w_v[a[j], own]) for n, j in enumerate(keys))
        heads.append(z)
    out = torch.cat(heads, dim=1)
    return out @ layer.out_proj.weight.double().T + layer.out_proj.bias.double()


def causal_mask(t):
    return torch.triu(torch.full((t, t), float("-inf")), 1)  # as fairseq's buffered_future_mask


def sentences(lengths=(7, 4, 6), seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, EMBED, generator=g) for n in lengths]


def batch_of(xs, left: bool):
    """``(T, B, C)`` and the key padding mask of sentences padded on the left or the right."""
    t_len = max(x.size(0) for x in xs)
    batch = torch.zeros(t_len, len(xs), EMBED)
    pad = torch.ones(len(xs), t_len, dtype=torch.bool)
    for b, x in enumerate(xs):
        rows = slice(t_len - x.size(0), t_len) if left else slice(0, x.size(0))
        batch[rows, b], pad[b, rows] = x, False
    return batch, pad


@pytest.mark.parametrize("heads", ["shared", "per_head"])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_full_sequence_equals_the_papers_equations_without_padding(causal, need_weights, heads):
    layer = shaw_layer(heads=heads)
    x = sentences((7,))[0]
    with torch.no_grad():
        out, _ = layer(x[:, None], x[:, None], x[:, None], attn_mask=causal_mask(7) if causal else None,
                       need_weights=need_weights)
    assert torch.allclose(out[:, 0].double(), paper_attention(layer, x, causal), atol=1e-5)


@pytest.mark.parametrize("heads", ["shared", "per_head"])
@pytest.mark.parametrize("left", [True, False], ids=["left-padded (encoder)", "right-padded (decoder)"])
def test_padded_batch_equals_the_papers_equations_per_sentence(left, heads):
    """Every sentence of a padded batch gets what the equations give it alone: pads are masked and
    only differences j - i count, so padding moves no distance."""
    layer = shaw_layer(seed=2, heads=heads)
    xs = sentences()
    batch, pad = batch_of(xs, left)
    causal = not left
    with torch.no_grad():
        out, _ = layer(batch, batch, batch, key_padding_mask=pad,
                       attn_mask=causal_mask(batch.size(0)) if causal else None, need_weights=False)
    for b, x in enumerate(xs):
        real = ~pad[b]
        assert torch.allclose(out[real, b].double(), paper_attention(layer, x, causal), atol=1e-5), b


@pytest.mark.parametrize("heads", ["shared", "per_head"])
def test_incremental_steps_equal_the_papers_causal_equations(heads):
    layer = shaw_layer(seed=3, heads=heads)
    x = sentences((6,))[0]
    state = {}
    with torch.no_grad():
        steps = torch.cat([layer(x[t : t + 1, None], None, None, incremental_state=state)[0] for t in range(6)])
    assert torch.allclose(steps[:, 0].double(), paper_attention(layer, x, causal=True), atol=1e-5)


def test_the_reference_would_see_a_missing_term():
    """The checks above fail for a layer that drops either table: zeroing w^K or w^V changes the output."""
    layer = shaw_layer(seed=4)
    x = sentences((7,))[0]
    reference = paper_attention(layer, x)
    for table in (layer.relative.keys, layer.relative.values):
        with torch.no_grad():
            saved = table.weight.clone()
            table.weight.zero_()
            out, _ = layer(x[:, None], x[:, None], x[:, None], need_weights=False)
            table.weight.copy_(saved)
        assert not torch.allclose(out[:, 0].double(), reference, atol=1e-3)


@pytest.mark.parametrize("k", [None, "3"])
def test_parameters_are_two_tables_of_2k_plus_1_by_head_dim_per_layer(k):
    flags = ["--shaw-max-distance", k] if k else []
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none")
    shaw, args = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "shaw", *flags)
    k = int(k or 16)
    assert args.shaw_max_distance == k and args.shaw_heads == "shared"  # resolved: the checkpoint records them
    head_dim = args.encoder_embed_dim // args.encoder_attention_heads
    layers = args.encoder_layers + args.decoder_layers
    count = [sum(p.numel() for p in m.parameters()) for m in (none, shaw)]
    assert count[1] - count[0] == layers * 2 * (2 * k + 1) * head_dim
    added = set(shaw.state_dict()) - set(none.state_dict())
    assert added == {f"{side}.layers.{i}.self_attn.relative.{t}.weight" for side, n in
                     (("encoder", args.encoder_layers), ("decoder", args.decoder_layers))
                     for i in range(n) for t in ("keys", "values")}
    # separate per layer, shared by the heads (no head axis)
    tables = [layer.self_attn.relative.keys.weight for layer in shaw.encoder.layers]
    assert len({t.data_ptr() for t in tables}) == len(tables)
    assert all(t.shape == (2 * k + 1, head_dim) for t in tables)


def test_per_head_vectors_are_one_set_per_layer_and_head():
    shaw, args = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "shaw",
                       "--shaw-heads", "per_head", "--shaw-max-distance", "3")
    assert args.shaw_heads == "per_head"
    shared, _ = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "shaw",
                      "--shaw-max-distance", "3")
    count = [sum(p.numel() for p in m.parameters()) for m in (shared, shaw)]
    layers = args.encoder_layers + args.decoder_layers
    assert count[1] - count[0] == layers * 2 * 7 * (args.encoder_embed_dim - args.encoder_embed_dim
                                                     // args.encoder_attention_heads)
    assert all(layer.self_attn.relative.keys.weight.shape == (7, args.encoder_embed_dim) for layer in
               shaw.encoder.layers)  # head h's vectors in columns h * head_dim ..


def test_posenc_pe_reads_per_head_vectors_as_one_table_per_layer_and_head(tmp_path):
    model, args = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "none",
                        "--shaw-heads", "per_head", "--shaw-max-distance", "2")
    save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    report, _ = checkpoint_report(str(tmp_path / "ckpt.pt"), run_probes=False)
    vectors = report["tables"]["encoder"]["relative_vectors"]
    heads, head_dim = args.encoder_attention_heads, args.encoder_embed_dim // args.encoder_attention_heads
    assert vectors["settings"]["heads"] == "per_head" and vectors["settings"]["head_dim"] == head_dim
    assert len(vectors["keys"]["norm"]) == args.encoder_layers * heads
    w_k = model.encoder.layers[1].self_attn.relative.keys.weight.double()
    head = w_k[:, 2 * head_dim:3 * head_dim]  # layer 1, head 2
    assert vectors["keys"]["norm"][heads + 2] == pytest.approx(head.norm(dim=1).tolist())


def test_training_reaches_both_tables_of_every_layer():
    task = DummyTask()
    model, _ = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "shaw", task=task)
    model.train()
    src, src_lengths, prev = random_batch(task.source_dictionary)
    model(src, src_lengths, prev)[0].sum().backward()
    for side in (model.encoder, model.decoder):
        for layer in side.layers:
            assert layer.self_attn.relative.keys.weight.grad.abs().sum() > 0
            assert layer.self_attn.relative.values.weight.grad.abs().sum() > 0


def test_a_zero_table_model_equals_the_model_without_positions():
    """With w^K = w^V = 0, shaw's attention is plain attention: same outputs as ``none``, weights loaded."""
    task = DummyTask()
    shaw, _ = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "shaw", task=task)
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none", task=task)
    none.load_state_dict({k: v for k, v in shaw.state_dict().items() if ".relative." not in k})
    batch = random_batch(task.source_dictionary)
    assert not torch.allclose(decoder_output(shaw, *batch), decoder_output(none, *batch), atol=1e-4)
    with torch.no_grad():
        for p in (p for n, p in shaw.named_parameters() if ".relative." in n):
            p.zero_()
    assert torch.allclose(decoder_output(shaw, *batch), decoder_output(none, *batch), atol=1e-5)


def test_fconv_refuses_shaw_in_one_line(capsys):
    with pytest.raises(SystemExit):
        parse_args("posenc_fconv_small", "--encoder-pos", "shaw")
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--encoder-pos" in last and "invalid choice: 'shaw'" in last and "'learned'" in last


def test_posenc_pe_reads_the_key_tables_against_distance(tmp_path, capsys):
    model, args = build("posenc_transformer_small", "--encoder-pos", "shaw", "--decoder-pos", "none",
                        "--shaw-max-distance", "4")
    save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    report, _ = checkpoint_report(str(tmp_path / "ckpt.pt"), run_probes=False)
    vectors = report["tables"]["encoder"]["relative_vectors"]
    assert vectors["distances"] == list(range(-4, 5))
    w_k = model.encoder.layers[1].self_attn.relative.keys.weight.double()
    assert vectors["keys"]["norm"][1] == pytest.approx(w_k.norm(dim=1).tolist())
    assert vectors["keys"]["cosine_with_distance_0"][1][4] == pytest.approx(1.0)
    assert vectors["settings"] == {"max_distance": 4, "layers": args.encoder_layers, "head_dim": w_k.size(1)}
    rc, _, err = run_cli(["checkpoint", str(tmp_path / "ckpt.pt"), "--out", str(tmp_path / "out"), "--no-probes"],
                         capsys)
    assert rc == 0, err
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["tables"]["encoder"]["relative_vectors"]["keys"]["norm"] == vectors["keys"]["norm"]
    for figure in ("relative_vectors_norm.png", "relative_vectors_cosine_with_distance_0.png"):
        assert (tmp_path / "out" / figure).read_bytes().startswith(b"\x89PNG")
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "### encoder: shaw" in markdown and f"| 1 | a^K | {w_k.norm(dim=1)[0]:.4g}" in markdown
