"""The position kinds' registry (``posenc.kinds``): the built-in kinds are the contracts', a
registration is checked, and a kind registered outside the package (``tests/toy_kind``, a
``--user-dir`` of its own) trains and decodes through fairseq's own tools."""

import importlib
import sys
from dataclasses import dataclass

import pytest
import torch

from fairseq_helpers import DummyTask, build, decoder_output, parse_args, random_batch
from fairseq_tools import REPO, fairseq, train
from posenc import kinds
from posenc.kinds import EMBEDDINGS, KEYS_VALUES, LOGITS, QUERIES_KEYS, InCheckpoint, option, register_kind

TOY = REPO / "tests" / "toy_kind"
SMALL = {"fconv": "posenc_fconv_small", "transformer": "posenc_transformer_small"}


@pytest.fixture
def registry(monkeypatch):
    """A registry of the built-in kinds for one test, the toy module imported afresh into it (this
    process may have imported it already: the doc tests parse docs/plugin.md's --user-dir tests/toy_kind)."""
    monkeypatch.setattr(kinds, "_REGISTRY", {k: v for k, v in kinds._REGISTRY.items() if k in kinds.BUILTIN_KINDS})
    sys.modules.pop("toy_kind", None)
    yield kinds
    sys.modules.pop("toy_kind", None)


def test_the_built_in_kinds_are_the_contracts(registry):
    # CONTRACTS.md's six kinds, then issue 31's; fconv refuses the ones that act in attention.
    assert registry.BUILTIN_KINDS == ("learned", "sinusoidal", "rope", "alibi", "t5", "none", "shaw", "shape", "cape")
    assert registry.kind_names("fconv") == ("learned", "sinusoidal", "none", "shape", "cape")
    assert registry.kind_names("transformer") == registry.BUILTIN_KINDS
    assert registry.pe_kinds() == tuple(k for k in registry.BUILTIN_KINDS if k != "none")
    assert {k.name: k.acts for k in registry.registered_kinds()} == {
        "learned": EMBEDDINGS, "sinusoidal": EMBEDDINGS, "rope": QUERIES_KEYS, "alibi": LOGITS, "t5": LOGITS,
        "none": EMBEDDINGS, "shaw": KEYS_VALUES, "shape": EMBEDDINGS, "cape": EMBEDDINGS}


def test_the_registry_is_read_live(registry):
    """A kind registered after import is in every answer the registry gives: the harness's pe=,
    the family's kinds, the kinds acting on logits, the settings the plugin records."""
    @dataclass
    class FlatOptions:
        flat_height: float = option(0.5, "how high")

    register_kind("flat", families="transformer", acts=LOGITS, build=lambda side: None, options=FlatOptions)
    assert registry.pe_kinds()[-1] == "flat" and registry.kind_names("fconv")[-1] == "cape"
    assert "flat" in registry.kinds_acting(LOGITS) and registry.family_pe_kinds("transformer")[-1] == "flat"
    assert "flat_height" in registry.position_settings("transformer")
    assert "flat_height" not in registry.position_settings("fconv")


@dataclass
class LaterOptions:
    ramp_offset: int = option(None, "as wide as the ramp", same_as="ramp_width")
    ramp_width: int = option(3, "how wide")


@pytest.mark.parametrize("name,options,message", [
    ("learned", {}, "'learned' is already registered"),
    ("Ramp-2", {}, "name 'Ramp-2' is not allowed"),
    ("ramp", {"families": ("rnn",)}, "families rnn not allowed; allowed: fconv, transformer"),
    ("ramp", {"families": ()}, "families (none) not allowed"),
    ("ramp", {"acts": "values"},
     "acts='values' is not allowed; allowed: embeddings, queries_keys, logits, keys_values"),
    ("ramp", {"acts": LOGITS}, "fconv cannot host a kind that acts on logits; allowed: embeddings"),
    ("ramp", {"checkpoint": InCheckpoint(reads="weights")}, "reads='weights' is not allowed"),
    ("ramp", {"build": 3}, "build must be a callable or 'module:function'"),
    ("ramp", {"revision": -1}, "revision=-1 is not allowed; allowed: a whole number >= 0"),
    ("ramp", {"options": "later"}, "option 'ramp_offset' is the same as 'ramp_width', which must be an option "
                                   "declared before it"),
])
def test_a_registration_is_checked(registry, name, options, message):
    if options.get("options") == "later":
        options = {"options": LaterOptions}
    options = {"families": ("fconv", "transformer"), "acts": EMBEDDINGS, "build": lambda side: None, **options}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        register_kind(name, **options)
    assert registry.kind_names() == registry.BUILTIN_KINDS


def test_revisions_are_those_of_the_kinds_that_changed(registry):
    """shape and cape changed in issue 40; every other built-in kind is at revision 0 and adds
    nothing to a cell's hashes (posenc.harness.hashing)."""
    assert {k.name: k.revision for k in registry.registered_kinds() if k.revision} == {"shape": 1, "cape": 1}
    assert registry.kind_revisions(("shape", "none")) == {"shape": 1}
    assert registry.kind_revisions(("sinusoidal", "rope", "unknown")) == {}


def test_an_unknown_kind_names_the_registered_ones():
    with pytest.raises(ValueError, match="unknown position kind 'ramp'; allowed: learned, sinusoidal, rope"):
        kinds.position_kind("ramp")


@pytest.mark.parametrize("family", ["fconv", "transformer"])
def test_a_kind_registered_outside_the_package_is_built_by_the_plugin(registry, family):
    toy = importlib.import_module("toy_kind")  # what fairseq does with --user-dir tests/toy_kind
    toys = ("ramp",) if family == "fconv" else ("ramp", "swirl", "gate", "nudge")  # fconv hosts embeddings only
    assert registry.kind_names(family)[-len(toys):] == toys and "ramp" not in registry.BUILTIN_KINDS
    args = parse_args(SMALL[family], "--encoder-pos", "ramp", "--decoder-pos", "ramp")  # argparse's choices
    task = DummyTask()
    model, _ = build(SMALL[family], "--encoder-pos", "ramp", "--decoder-pos", "ramp", task=task)
    learned, _ = build(SMALL[family], "--encoder-pos", "learned", "--decoder-pos", "learned", task=task)
    assert (args.encoder_pos, args.decoder_pos) == ("ramp", "ramp")
    for side in (model.encoder, model.decoder):
        assert isinstance(side.embed_positions, toy.RampEmbedding)
    assert model.max_positions() == learned.max_positions()
    assert {k for k in model.state_dict() if "embed_positions" in k} == {"encoder.embed_positions.slope",
                                                                         "decoder.embed_positions.slope"}
    src, src_lengths, prev = random_batch(task.source_dictionary)
    assert torch.isfinite(decoder_output(model, src, src_lengths, prev)).all()


def test_the_toy_kind_adds_its_ramp_from_the_first_real_token(registry):
    toy = importlib.import_module("toy_kind")
    ramp = toy.RampEmbedding(embed_dim=3, padding_idx=1, max_positions=10)
    tokens = torch.tensor([[1, 1, 5, 6, 7], [5, 6, 7, 8, 9]])  # the first sentence left-padded
    out = ramp(tokens)
    expected = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]) * toy.INITIAL_SLOPE
    assert torch.allclose(out, expected[..., None].expand(-1, -1, 3))
    assert torch.equal(ramp(tokens, incremental_state={}), out[:, -1:])  # a decoding step: the newest position


# The toy kinds of tests/toy_kind, one per act: (family, kind, a state-dict key its training moves
# away from zero or from its initial value, or None for a kind without parameters).
TOYS = [("fconv", "ramp", "{side}.embed_positions.slope"), ("transformer", "ramp", "{side}.embed_positions.slope"),
        ("transformer", "swirl", None), ("transformer", "gate", "{side}.relative_attention_bias.u"),
        ("transformer", "nudge", "{side}.layers.0.self_attn.relative.values")]


@pytest.mark.parametrize("kind,acts", [("ramp", EMBEDDINGS), ("swirl", QUERIES_KEYS), ("gate", LOGITS),
                                       ("nudge", KEYS_VALUES)])
def test_the_toy_kinds_cover_every_act_and_decode_incrementally_as_in_full(registry, kind, acts):
    importlib.import_module("toy_kind")
    assert registry.position_kind(kind).acts == acts and set(kinds.ACTS) == {EMBEDDINGS, QUERIES_KEYS, LOGITS,
                                                                             KEYS_VALUES}
    task = DummyTask()
    model, args = build("posenc_transformer_small", "--encoder-pos", kind, "--decoder-pos", kind, task=task)
    none, _ = build("posenc_transformer_small", "--encoder-pos", "none", "--decoder-pos", "none", task=task)
    with torch.no_grad():  # the zero-initialised toys made visible
        for name, p in model.named_parameters():
            if name not in none.state_dict():
                p.normal_(std=0.3)
    src, src_lengths, prev = random_batch(task.source_dictionary, bsz=2, tgt_len=6)
    prev[-1, -1] = task.source_dictionary.index("w3")  # no padding inside a decoded prefix
    full = decoder_output(model, src, src_lengths, prev)
    none.load_state_dict({k: v for k, v in model.state_dict().items() if k in none.state_dict()})
    assert not torch.allclose(full, decoder_output(none, src, src_lengths, prev), atol=1e-4)  # the kind acts
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], encoder_out, incremental_state=state)[0] for t in range(6)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-4)


def test_a_toy_kinds_options_are_flags_recorded_in_the_args(registry):
    importlib.import_module("toy_kind")
    assert parse_args("posenc_transformer_small").swirl_angle == 0.3  # resolved even when unused
    assert parse_args("posenc_transformer_small", "--swirl-angle", "0.7").swirl_angle == 0.7
    assert not hasattr(parse_args("posenc_fconv_small"), "swirl_angle")  # fconv cannot host swirl


def test_a_query_dependent_logits_term_sees_the_queries(registry):
    """``gate`` declares ``uses_query``: the attention hands it the scaled queries of each layer."""
    toy = importlib.import_module("toy_kind")
    seen = []
    original = toy.QueryGate.forward
    toy.QueryGate.forward = lambda self, *a, query=None, **k: seen.append(query.shape) or original(
        self, *a, query=query, **k)
    try:
        task = DummyTask()
        model, args = build("posenc_transformer_small", "--encoder-pos", "gate", "--decoder-pos", "none", task=task)
        src, src_lengths, prev = random_batch(task.source_dictionary, src_len=7)
        decoder_output(model, src, src_lengths, prev)
    finally:
        toy.QueryGate.forward = original
    head_dim = args.encoder_embed_dim // args.encoder_attention_heads
    assert seen == [(3, args.encoder_attention_heads, 7, head_dim)] * args.encoder_layers


@pytest.mark.slow
@pytest.mark.parametrize("family,kind,key", TOYS)
def test_a_kind_registered_outside_the_package_trains_and_decodes_through_fairseq(reversal_corpus, tmp_path, family,
                                                                                   kind, key):
    """``--user-dir tests/toy_kind`` (which imports the plugin and registers the toys) is all it takes."""
    from posenc.analysis.read.fairseq_checkpoint import load_checkpoint, model_args
    from posenc.analysis.read.position_tables import extract_tables

    train(reversal_corpus, tmp_path / "ckpt", SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind,
          cwd=tmp_path, user_dir=TOY)
    checkpoint = tmp_path / "ckpt" / "checkpoint_last.pt"
    ckpt = load_checkpoint(str(checkpoint))
    args = model_args(ckpt)
    assert (args["encoder_pos"], args["decoder_pos"]) == (kind, kind)
    if kind == "swirl":
        assert args["swirl_angle"] == 0.3  # its option, recorded
    for side in ("encoder", "decoder"):
        if key is None:
            continue
        trained = ckpt["model"][key.format(side=side)]
        initial = torch.full_like(trained, 0.01 if kind == "ramp" else 0.0)
        assert not torch.allclose(trained, initial)  # training reached it
    out = fairseq("fairseq-generate", reversal_corpus, "--user-dir", TOY, "--path", checkpoint,
                  "--beam", "2", "--batch-size", "8", "--required-batch-size-multiple", "1",
                  "--max-len-a", "1.2", "--max-len-b", "5", "--cpu", cwd=tmp_path)
    assert len([line for line in out.stdout.splitlines() if line.startswith("H-")]) == 21
    # posenc-pe, which knows only the built-in kinds, keeps the recorded name and finds no table.
    tables = extract_tables(ckpt, require_table=False)
    assert {side: (t.kind, t.table) for side, t in tables.items()} == {"encoder": (kind, None),
                                                                       "decoder": (kind, None)}


@pytest.mark.slow
def test_without_its_user_dir_the_kind_is_refused_with_one_line(reversal_corpus, tmp_path):
    proc = fairseq("fairseq-train", reversal_corpus, "--user-dir", REPO / "posenc" / "fairseq_plugin",
                   "--arch", "posenc_transformer_small", "--encoder-pos", "ramp", "--save-dir", tmp_path,
                   cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "--encoder-pos" in last and "invalid choice: 'ramp'" in last
    assert "'learned', 'sinusoidal', 'rope', 'alibi', 't5', 'none'" in last


def test_the_plugin_reads_the_registry_when_it_builds_its_parser(registry):
    register_kind("flat", families="transformer", acts=EMBEDDINGS, build=lambda side: None)
    assert parse_args("posenc_transformer_small", "--encoder-pos", "flat").encoder_pos == "flat"
    with pytest.raises(SystemExit):  # argparse: not among fconv's choices
        parse_args("posenc_fconv_small", "--encoder-pos", "flat")
    model, _ = build("posenc_transformer_small", "--encoder-pos", "flat", "--decoder-pos", "none")
    assert model.encoder.embed_positions is None and model.decoder.embed_positions is None


def test_the_analysis_reads_a_kind_through_its_registration_alone(registry, tmp_path):
    """A bias kind registered here, with its own rebuild, is analysed like t5 and alibi: the
    analysis calls the registration and knows no kind by name."""
    from posenc.analysis.measure.checkpoint import checkpoint_report
    from posenc.analysis.read.relative_bias import RelativeBias
    from test_analysis_rebuild import save_like_fairseq

    def rebuild(ckpt, side, max_len):
        distances = torch.arange(-3, 4)
        values = -0.5 * distances.abs().double()[None].expand(2, -1)  # two heads, -|d|/2
        return RelativeBias(side, "tilt", side == "decoder", 2, distances, values, "closed form (test)"), None

    register_kind("tilt", families="transformer", acts=LOGITS, build="posenc.encodings.attention_bias:build_alibi",
                  checkpoint=InCheckpoint(reads=kinds.BIAS, rebuild=rebuild))
    model, args = build("posenc_transformer_small", "--encoder-pos", "tilt", "--decoder-pos", "none")
    save_like_fairseq(tmp_path / "ckpt.pt", model, args)
    report, _ = checkpoint_report(str(tmp_path / "ckpt.pt"), run_probes=False)
    bias = report["tables"]["encoder"]["relative_bias"]
    assert (bias["kind"], bias["learned"], bias["distances"]) == ("tilt", False, list(range(-3, 4)))
    assert [h["locality"] for h in bias["per_head"]] == ["local", "local"]
    with pytest.raises(ValueError, match="reads='bias' needs a rebuild"):
        register_kind("tilt2", families="transformer", acts=LOGITS, build=lambda side: None,
                      checkpoint=InCheckpoint(reads=kinds.BIAS))
