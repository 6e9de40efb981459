"""Cells from before the optim group keep their results and checkpoints: the hashes the harness
recorded then (commit ced5e02, the committed studies' sweeps) are proved equal, not assumed."""

import json
import zipfile

import pytest

from posenc.cells.keys import NOT_TRAINING
from posenc.cells.layout import BEST, CHECKPOINTS, HYPOTHESES_FILE, RESULT_FILE, STATE_FILE
from posenc.harness.cell.resolve import resolve_cell
from posenc.harness.hashing import before_optim_group, config_hash, training_hash
from posenc.harness.run import resume
from posenc.harness.run.lifecycle import finished_result
from project import compose_cfg

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
    assert before_optim_group(cfg) == recorded_config  # ... and the old one is rebuilt exactly
    assert before_optim_group(cfg, NOT_TRAINING) == recorded_training


def test_another_optimiser_or_a_schedule_of_its_own_is_not_the_old_cell():
    overrides, recorded, _ = RECORDED[0]
    assert before_optim_group(compose_cfg(*overrides, "optim.args.lr=0.001")) != recorded
    assert before_optim_group(compose_cfg(*overrides, "optim=convs2s")) != recorded
    assert before_optim_group(compose_cfg("model=transformer_base", "budget=paper")) == ""  # 100k updates: new


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
    cell = resolve_cell(cfg).checked()
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
    cell = resolve_cell(cfg).checked()
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
