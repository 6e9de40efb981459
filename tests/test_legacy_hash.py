"""Cells from before the optim group keep their results and checkpoints: the hashes the harness
recorded then (commit ced5e02, the committed studies' sweeps) are proved equal, not assumed. So do
cells of kinds at revision 0 recorded before kinds had revisions (issue 40), while a revised kind's
cells (shape, cape) are never taken for the ones trained with its old behaviour."""

import json
import zipfile

import pytest

from posenc.cells.keys import NOT_TRAINING
from posenc.cells.layout import BEST, CHECKPOINTS, HYPOTHESES_FILE, RESULT_FILE, STATE_FILE
from posenc.harness.config.resolve import resolve_cell
from posenc.harness.hashing import (
    KIND_REVISIONS,
    before_optim_group,
    cell_hashes,
    config_hash,
    digest,
    hashed_config,
    training_hash,
)
from posenc.harness.run import resume
from posenc.harness.run.lifecycle import finished_result
from posenc.kinds import find_kind
from project import cell_of, compose_cfg

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")

# (the cell's overrides, its result.json config_hash, its state.json training_hash), as written by
# the harness before the optimiser left the budget.
MULTI30K = ["data=custom", "data.train=../shared/data/multi30k/train", "data.valid=../shared/data/multi30k/val",
            "data.test=../shared/data/multi30k/test_2016_flickr", "data.src=de", "data.tgt=en",
            "experiment_name=table4_multi30k"]
RECORDED = [
    (["placement=both", "seed=1", "experiment=table4", "budget.max_time_min=0"], "6dd50b1ea8f04f9a",
     "2657929fbca771bb"),
    (["placement=both", "seed=1", "experiment=table4_transformer", "budget.max_time_min=0"], "8aeba94a294f08fa",
     "d1d408376b88c125"),
    (["placement=both", "seed=1", "experiment=table4", *MULTI30K, "budget.max_time_min=0"], "362db1a93177b105",
     "197a18a3228909ef"),
]


@pytest.mark.parametrize("overrides,recorded_config,recorded_training", RECORDED)
def test_the_hashes_recorded_before_the_optim_group_are_rebuilt(overrides, recorded_config, recorded_training):
    cfg = compose_cfg(*overrides)
    assert config_hash(cfg) != recorded_config  # the layout did change the hash ...
    assert before_optim_group(hashed_config(cfg)) == recorded_config  # ... and the old one is rebuilt exactly
    assert before_optim_group(hashed_config(cfg, NOT_TRAINING)) == recorded_training


def test_another_optimiser_or_a_schedule_of_its_own_is_not_the_old_cell():
    overrides, recorded, _ = RECORDED[0]
    assert before_optim_group(hashed_config(compose_cfg(*overrides, "optim.args.lr=0.001"))) != recorded
    assert before_optim_group(hashed_config(compose_cfg(*overrides, "optim=convs2s"))) != recorded
    # 100k updates: new
    assert before_optim_group(hashed_config(compose_cfg("model=transformer_base", "budget=paper"))) == ""


def old_cell(tmp_path, config, training):
    job = tmp_path / "cell"
    (job / CHECKPOINTS).mkdir(parents=True)
    with zipfile.ZipFile(job / CHECKPOINTS / BEST, "w") as archive:
        archive.writestr("data.pkl", b"x")
    (job / HYPOTHESES_FILE).write_text("a\n")
    (job / RESULT_FILE).write_text(json.dumps({"status": "ok", "error": "", "bleu": 88.0, "config_hash": config,
                                               "hypotheses": HYPOTHESES_FILE}))
    (job / STATE_FILE).write_text(json.dumps({"training_hash": training, "finished": True,
                                              "training": {"num_updates": 218}}))
    return job


def test_an_old_finished_cell_is_kept_and_its_hashes_brought_up_to_date(tmp_path):
    overrides, config, training = RECORDED[0]
    cfg, job = compose_cfg("paths.cache_dir=/no/cache", *overrides), old_cell(tmp_path, *RECORDED[0][1:])
    cell = cell_of(resolve_cell(cfg))
    assert finished_result(job, cell).bleu == 88.0
    assert json.loads((job / RESULT_FILE).read_text())["config_hash"] == config_hash(cfg)
    plan = resume.plan(job, cell)
    assert plan.action == "score" and (job / CHECKPOINTS / BEST).exists()
    assert json.loads((job / STATE_FILE).read_text())["training_hash"] == training_hash(cfg)
    assert finished_result(job, cell).bleu == 88.0  # and again, now by today's hash


def test_an_old_cell_with_another_configuration_is_run_again(tmp_path):
    overrides, _, _ = RECORDED[0]
    cfg = compose_cfg("paths.cache_dir=/no/cache", *overrides, "optim.args.lr=0.001")
    job = old_cell(tmp_path, *RECORDED[0][1:])
    cell = cell_of(resolve_cell(cfg))
    assert finished_result(job, cell) is None
    assert resume.plan(job, cell).action == "fresh" and not (job / CHECKPOINTS).exists()


def test_a_null_trial_hashes_as_the_configs_before_the_key_existed():
    """``trial`` came with the tune strategy: a cell that is no trial keeps the hashes it had before
    (its finished result and checkpoints are kept); a trial is a cell of its own."""
    from omegaconf import open_dict

    from posenc.harness.hashing import config_hash, training_hash
    cfg = compose_cfg("experiment=table4_transformer", "placement=none", "seed=2")
    before = cfg.copy()
    with open_dict(before):
        del before["trial"]  # the config as it was composed before the key existed
    assert "trial" in cfg and cfg.trial is None
    assert config_hash(cfg) == config_hash(before) and training_hash(cfg) == training_hash(before)
    assert config_hash(compose_cfg("experiment=table4_transformer", "placement=none", "seed=2", "trial=0")) \
        != config_hash(cfg)


# Cells of the Multi30k kinds study (/work/sweeps/seq_kinds_multi30k, trained before kinds had
# revisions): (pe, the result.json config_hash, the state.json training_hash) of seed 1.
MULTI30K_KINDS = ["placement=both", "seed=1", "experiment=extrapolation_multi30k", "budget.max_time_min=0",
                  "budget.step_timeout_min=90", "data.mirror=file:///work/shared/data/multi30k"]
BEFORE_REVISIONS = [("sinusoidal", "0f2ebcb58648a125", "637d0ba84a69be33"),
                    ("alibi", "ec09e5f0bcef9f8c", "48163f4d0873193c"),
                    ("shaw", "a12f72180f49103e", "6226aff76577b6b2")]


@pytest.mark.parametrize("pe,recorded_config,recorded_training", BEFORE_REVISIONS)
def test_kinds_at_revision_0_keep_the_hashes_their_cells_were_recorded_with(pe, recorded_config,
                                                                             recorded_training):
    cfg = compose_cfg(f"pe={pe}", *MULTI30K_KINDS)
    assert cell_hashes(cfg).recognised_config(recorded_config) == config_hash(cfg) == recorded_config
    assert cell_hashes(cfg).recognised_training(recorded_training) == training_hash(cfg) == recorded_training


@pytest.mark.parametrize("pe", ["shape", "cape"])
@pytest.mark.parametrize("placement", ["both", "source", "target"])
def test_a_revised_kinds_cells_are_not_the_ones_trained_before(pe, placement):
    cfg = compose_cfg(f"pe={pe}", *MULTI30K_KINDS, f"placement={placement}")
    assert find_kind(pe).revision == 1
    for ignore in ((), NOT_TRAINING):
        data = hashed_config(cfg, ignore)
        assert data.pop(KIND_REVISIONS) == {pe: 1}
        before = digest(data)  # what the code before revisions hashed
        assert config_hash(cfg, ignore) != before
        assert cell_hashes(cfg).recognised_config(before) == "" and cell_hashes(cfg).recognised_training(before) == ""
        # nor the layout before the optim group
        assert before_optim_group(hashed_config(cfg, ignore)) not in ("", before)


def test_a_cell_without_the_revised_kind_on_any_side_keeps_its_hash():
    cfg = compose_cfg("pe=shape", *MULTI30K_KINDS, "placement=none")
    assert KIND_REVISIONS not in hashed_config(cfg)
