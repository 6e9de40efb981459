"""Each model preset named after a fairseq architecture trains with fairseq's published recipe for it:
the cell's fairseq-train line holds every flag of fairseq's own command line, with the same value.

The reference command lines are fairseq's, as its documentation prints them (examples/translation/README.md,
docs/getting_started.rst); the flags fairseq's defaults supplied when a recipe was written, and which
fairseq 0.12 no longer defaults, are listed beside it (conf/optim/fairseq_*.yaml says why)."""

import shlex

import pytest

from posenc.harness.config.commands import train_command
from project import compose_cell

# fairseq's examples/translation/README.md, "IWSLT'14 German to English (Transformer)".
IWSLT_TRANSFORMER = """fairseq-train data-bin/iwslt14.tokenized.de-en \
    --arch transformer_iwslt_de_en --share-decoder-input-output-embed \
    --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 \
    --lr 5e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000 \
    --dropout 0.3 --weight-decay 0.0001 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --max-tokens 4096"""
# The same README, "WMT'14 English to German (Convolutional)"; then fairseq's defaults of January 2018.
WMT_FCONV = """fairseq-train data-bin/wmt17_en_de \
    --arch fconv_wmt_en_de \
    --lr 0.5 --clip-norm 0.1 --dropout 0.2 --max-tokens 4000 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --lr-scheduler fixed --force-anneal 50 \
    --save-dir checkpoints/fconv_wmt_en_de"""
WMT_FCONV_DEFAULTS = "--optimizer nag --momentum 0.99 --stop-min-lr 1e-5"
# fairseq's docs/getting_started.rst, "Training"; then fairseq's defaults of September 2018.
IWSLT_FCONV = """fairseq-train data-bin/iwslt14.tokenized.de-en \
    --optimizer nag --lr 0.25 --clip-norm 0.1 --dropout 0.2 --max-tokens 4000 \
    --arch fconv_iwslt_de_en --save-dir checkpoints/fconv"""
IWSLT_FCONV_DEFAULTS = "--momentum 0.99 --criterion cross_entropy --lr-scheduler reduce_lr_on_plateau " \
                       "--lr-shrink 0.1 --stop-min-lr 1e-5"
NOT_THE_RECIPES = {"--save-dir"}  # where the checkpoints go: the harness's

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")  # the config is composed here


def recipe_flags(command: str) -> dict:
    """``{flag: value}`` of a fairseq command line (a flag without a value: True); the data directory dropped."""
    words, flags = shlex.split(command)[2:], {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            following = words[i + 1] if i + 1 < len(words) else "--"
            flags[word] = True if following.startswith("--") else following
    return {k: v for k, v in flags.items() if k not in NOT_THE_RECIPES}


def same(ours, theirs) -> bool:
    """Values as fairseq parses them: 5e-4 is 0.0005."""
    try:
        return float(ours) == float(theirs)
    except (TypeError, ValueError):
        return ours == theirs


@pytest.mark.parametrize("model,recipe", [("transformer_iwslt_de_en", IWSLT_TRANSFORMER),
                                          ("fconv_wmt_en_de", f"{WMT_FCONV} {WMT_FCONV_DEFAULTS}"),
                                          ("fconv_iwslt_de_en", f"{IWSLT_FCONV} {IWSLT_FCONV_DEFAULTS}")])
def test_a_fairseq_architectures_preset_trains_with_fairseqs_recipe(model, recipe):
    """Under budget=paper (the budget a recipe is for): every flag of fairseq's line, and the stock
    architecture's posenc twin; a recipe without an end gets one from the budget, as a user gives it."""
    cell = compose_cell(f"model={model}", "budget=paper", "budget.max_epoch=50")
    argv = train_command("bin", "ckpt", cell)
    ours = recipe_flags(shlex.join(["fairseq-train", *argv[2:]]))
    theirs = recipe_flags(recipe)
    assert ours.pop("--arch") == f"posenc_{theirs.pop('--arch')}"
    wrong = {flag: (ours.get(flag), value) for flag, value in theirs.items() if not same(ours.get(flag), value)}
    assert wrong == {}


def test_the_iwslt_transformer_recipe_is_the_issues_list():
    """What the recipe means, stated once more in words (the contract's list), on the composed config."""
    cell = compose_cell("model=transformer_iwslt_de_en", "budget=paper", "budget.max_epoch=50")
    optim = cell.optim_args
    assert cell.model_args == {"share_decoder_input_output_embed": True}
    assert (optim["optimizer"], optim["adam_betas"], optim["lr"], optim["lr_scheduler"], optim["warmup_updates"],
            optim["dropout"], optim["weight_decay"], optim["label_smoothing"], cell.max_tokens) == \
        ("adam", "(0.9, 0.98)", 5e-4, "inverse_sqrt", 4000, 0.3, 1e-4, 0.1, 4096)


def test_the_cpu_budgets_keep_their_own_batch_and_other_models_the_papers():
    assert compose_cell("model=transformer_iwslt_de_en", "budget=smoke").max_tokens == 2000
    assert compose_cell("model=fconv_table4", "budget=paper").max_tokens == 4000
    assert compose_cell("model=transformer_base", "budget=paper").optim_args["lr"] == 0.0007  # the paper's recipe
