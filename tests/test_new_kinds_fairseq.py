"""``shaw``, ``shape`` and ``cape`` through fairseq's own tools, as a user runs them: trained with a
non-default flag of the kind, which the checkpoint records, and decoded by ``fairseq-generate``;
SHAPE's (at ``--shape-eval-offset 0``) and CAPE's checkpoints decode to the same hypotheses when
fairseq is told to build them as ``sinusoidal`` (``--model-overrides``): at inference they are the
sinusoid; SHAPE at its default offset K records it and its generator's state."""

import pytest
import torch

from fairseq_tools import PLUGIN, REPO, fairseq, train

SMALL = {"fconv": "posenc_fconv_small", "transformer": "posenc_transformer_small"}
GENERATE = ("--beam", "2", "--batch-size", "8", "--required-batch-size-multiple", "1", "--max-len-a", "1.2",
            "--max-len-b", "5", "--cpu")


def hypotheses(stdout: str) -> list:
    return sorted(line for line in stdout.splitlines() if line.startswith("H-"))


@pytest.mark.slow
@pytest.mark.parametrize("family,kind,flags,recorded", [
    ("transformer", "shaw", ["--shaw-max-distance", "4"], {"shaw_max_distance": 4}),
    ("fconv", "shape", ["--shape-max-shift", "10", "--shape-eval-offset", "0"],
     {"shape_max_shift": 10, "shape_eval_offset": 0}),
    ("transformer", "shape", [], {"shape_max_shift": 40, "shape_eval_offset": 40}),
    ("transformer", "cape", ["--cape-max-global-shift", "3"], {"cape_max_global_shift": 3.0}),
])
def test_a_new_kind_trains_records_its_flag_and_decodes_through_fairseq(reversal_corpus, tmp_path, family, kind,
                                                                         flags, recorded):
    from posenc.analysis.read.fairseq_checkpoint import load_checkpoint, model_args

    train(reversal_corpus, tmp_path / "ckpt", SMALL[family], "--encoder-pos", kind, "--decoder-pos", kind, *flags,
          cwd=tmp_path)
    checkpoint = tmp_path / "ckpt" / "checkpoint_last.pt"
    ckpt = load_checkpoint(str(checkpoint))
    args = model_args(ckpt)
    assert (args["encoder_pos"], args["decoder_pos"]) == (kind, kind)
    assert {name: args[name] for name in recorded} == recorded
    out = hypotheses(fairseq("fairseq-generate", reversal_corpus, "--path", checkpoint, "--user-dir",
                             "posenc/fairseq_plugin", *GENERATE, cwd=REPO).stdout)
    assert len(out) == 21
    if kind == "shaw":
        assert ckpt["model"]["encoder.layers.0.self_attn.relative.keys.weight"].shape[0] == 2 * 4 + 1
        assert torch.isfinite(ckpt["model"]["decoder.layers.2.self_attn.relative.values.weight"]).all()
    elif args.get("shape_eval_offset"):  # decoded at the authors' offset K: not the unshifted sinusoid
        assert ckpt["model"]["encoder.embed_positions._extra_state"].dtype == torch.uint8  # the generator's state
    else:
        overrides = "{'encoder_pos': 'sinusoidal', 'decoder_pos': 'sinusoidal'}"
        as_sinusoidal = fairseq("fairseq-generate", reversal_corpus, "--path", checkpoint, "--user-dir",
                                "posenc/fairseq_plugin", "--model-overrides", overrides, *GENERATE, cwd=REPO)
        assert hypotheses(as_sinusoidal.stdout) == out


def train_until(data, save_dir, updates, cwd, kind):
    return fairseq("fairseq-train", data, "--user-dir", PLUGIN, "--arch", SMALL["transformer"], "--encoder-pos", kind,
                   "--decoder-pos", kind, "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400",
                   "--max-update", str(updates), "--save-dir", save_dir, "--no-epoch-checkpoints",
                   "--no-progress-bar", "--cpu", "--seed", "1", "--required-batch-size-multiple", "1",
                   "--num-workers", "0", cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["shape", "cape"])
def test_a_cell_killed_and_resumed_draws_the_shifts_of_an_uninterrupted_one(reversal_corpus, tmp_path, kind):
    """fairseq-train stopped after 3 updates and resumed to 6 ends with the shift generators, and
    the weights, of a run that trained 6 updates at once: the generator's state travels in the
    checkpoint, so the resumed run draws the same shifts."""
    from posenc.analysis.read.fairseq_checkpoint import load_checkpoint

    train_until(reversal_corpus, tmp_path / "whole", 6, tmp_path, kind)
    train_until(reversal_corpus, tmp_path / "resumed", 3, tmp_path, kind)
    train_until(reversal_corpus, tmp_path / "resumed", 6, tmp_path, kind)
    whole, resumed = (load_checkpoint(str(tmp_path / run / "checkpoint_last.pt"))["model"] for run in ("whole",
                                                                                                      "resumed"))
    for side in ("encoder", "decoder"):
        key = f"{side}.embed_positions._extra_state"
        assert torch.equal(whole[key], resumed[key])
    assert whole.keys() == resumed.keys()
    assert all(torch.allclose(whole[k].float(), resumed[k].float(), atol=1e-6) for k in whole)
