"""The plugin through fairseq's own command-line tools, as users run it."""

import subprocess
import sys

import pytest

from fairseq_tools import PLUGIN, REPO, fairseq, train

PLACEMENTS = {"both": ("K", "K"), "source": ("K", "none"), "target": ("none", "K"), "none": ("none", "none")}
FAMILIES = {"fconv": ("posenc_fconv_small", "learned"), "transformer": ("posenc_transformer_small", "rope")}


@pytest.mark.slow
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_train_and_generate_every_placement(reversal_corpus, tmp_path, family, placement):
    arch, kind = FAMILIES[family]
    enc, dec = (kind if k == "K" else k for k in PLACEMENTS[placement])
    # From a directory outside the repo, with an absolute --user-dir.
    train(reversal_corpus, tmp_path / "ckpt", arch, "--encoder-pos", enc, "--decoder-pos", dec, cwd=tmp_path)
    out = fairseq("fairseq-generate", reversal_corpus, "--user-dir", PLUGIN,
                  "--path", tmp_path / "ckpt" / "checkpoint_last.pt",
                  "--beam", "2", "--batch-size", "8", "--required-batch-size-multiple", "1",
                  "--max-len-a", "1.2", "--max-len-b", "5", "--cpu", cwd=tmp_path)
    hypotheses = [line for line in out.stdout.splitlines() if line.startswith("H-")]
    assert len(hypotheses) == 21


@pytest.mark.slow
def test_relative_user_dir_from_the_repo_root_and_fairseq_validate(reversal_corpus, tmp_path):
    train(reversal_corpus, tmp_path / "ckpt", "posenc_fconv_small", "--decoder-pos", "sinusoidal",
          cwd=REPO, user_dir="posenc/fairseq_plugin")
    out = fairseq("fairseq-validate", reversal_corpus, "--user-dir", "posenc/fairseq_plugin", "--task", "translation",
                  "--path", tmp_path / "ckpt" / "checkpoint_last.pt", "--valid-subset", "valid", "--batch-size", "8",
                  "--required-batch-size-multiple", "1", "--cpu", cwd=REPO)
    assert "loss" in out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("encoder_pos,decoder_pos", [("alibi", "t5"), ("t5", "alibi")])
def test_train_and_generate_with_attention_biases(reversal_corpus, tmp_path, encoder_pos, decoder_pos):
    """Each bias kind on each side, through training, a checkpoint and beam search."""
    train(reversal_corpus, tmp_path / "ckpt", "posenc_transformer_small", "--encoder-pos", encoder_pos,
          "--decoder-pos", decoder_pos, cwd=tmp_path)
    out = fairseq("fairseq-generate", reversal_corpus, "--user-dir", PLUGIN,
                  "--path", tmp_path / "ckpt" / "checkpoint_last.pt",
                  "--beam", "3", "--batch-size", "8", "--required-batch-size-multiple", "1",
                  "--max-len-a", "1.2", "--max-len-b", "5", "--cpu", cwd=tmp_path)
    assert len([line for line in out.stdout.splitlines() if line.startswith("H-")]) == 21


@pytest.mark.slow
# Each attention kind once, the sides taking turns: both flags are one argparse choice list.
@pytest.mark.parametrize("flag,kind", [("--encoder-pos", "rope"), ("--decoder-pos", "alibi"),
                                       ("--encoder-pos", "t5"), ("--decoder-pos", "shaw")])
def test_fconv_refuses_attention_kinds_at_start_up_with_one_line(reversal_corpus, tmp_path, kind, flag):
    proc = fairseq("fairseq-train", reversal_corpus, "--user-dir", PLUGIN, "--arch", "posenc_fconv_small",
                   flag, kind, "--save-dir", tmp_path, cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    allowed = last.split("choose from ")[-1]
    assert flag in last and f"invalid choice: '{kind}'" in last
    assert [k.strip(" ')") for k in allowed.split(",")] == ["learned", "sinusoidal", "none", "shape", "cape"]


def test_user_dir_after_importing_the_package_in_the_same_process(tmp_path):
    """fairseq imports --user-dir as a top-level module; the package import must not register twice."""
    code = (
        "import argparse, posenc.fairseq_plugin\n"
        "from fairseq import utils\n"
        f"utils.import_user_module(argparse.Namespace(user_dir={str(PLUGIN)!r}))\n"
        "import fairseq_plugin\n"
        "from fairseq.models import ARCH_MODEL_REGISTRY\n"
        "assert ARCH_MODEL_REGISTRY['posenc_fconv_table4'].__name__ == 'PosencFConvModel'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")
