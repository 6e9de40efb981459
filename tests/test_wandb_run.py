"""logger=wandb: one run per cell with fairseq's curves, the config and the scores, and a table run
per sweep; checked in the files W&B itself writes in offline mode (no account, no network)."""

import json
from pathlib import Path

import pytest

import project
from posenc.cells.record import Record
from posenc.cells.sweep import read_sweep
from posenc.harness.config.resolve import resolve_cell
from posenc.harness.fairseq_logs import parse_record, training_fields, wandb_metrics
from posenc.harness.tracking.wandb_run import (
    cell_summary,
    group_name,
    init_kwargs,
    log_finished_cell,
    log_sweep_table,
    run_id,
    start_cell_run,
    sweep_token,
)
from posenc.report.table import SWEEP_END, sweep_end_report, table_rows
from wandb_offline import offline_runs

# Real fairseq-train output (--log-format json), from a smoke cell.
TRAIN_LOG = [
    '2026-11-30 03:39:37 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "8.5", "nll_loss": "8.4", '
    '"ppl": "337.8", "wps": "6000.1", "ups": "4.1", "wpb": "1400", "bsz": "98", "num_updates": "2", "lr": "0.002", '
    '"gnorm": "0.5", "clip": "100", "train_wall": "1", "wall": "1"}\n',
    '2026-11-30 03:39:38 | INFO | valid | {"epoch": 1, "valid_loss": "7.803", "valid_nll_loss": "7.692", '
    '"valid_ppl": "206.78", "valid_wps": "0", "valid_wpb": "549", "valid_bsz": "40", "valid_num_updates": "3"}\n',
    '2026-11-30 03:39:38 | INFO | train | {"epoch": 1, "train_loss": "8.187", "train_nll_loss": "8.167", '
    '"train_ppl": "287.32", "train_wps": "6486.5", "train_ups": "4.34", "train_wpb": "1428.3", "train_bsz": "100", '
    '"train_num_updates": "3", "train_lr": "0.002", "train_gnorm": "0.424", "train_clip": "100", '
    '"train_train_wall": "1", "train_wall": "2"}\n',
    "2026-11-30 03:39:38 | INFO | fairseq.checkpoint_utils | Saved checkpoint checkpoints/checkpoint_best.pt\n",
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """W&B offline, and none of the developer's own W&B settings leaking into the test."""
    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_DIR", "WANDB_RUN_ID", "WANDB_NAME",
                 "WANDB_RUN_GROUP", "WANDB_TAGS", "WANDB_NOTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def compose_cfg(*overrides, hydra=False):
    # paths.cache_dir names Hydra's runtime cwd, which only a running posenc-run has.
    return project.compose_cfg("paths.cache_dir=/no/cache", *overrides, hydra=hydra)


def compose_cell(*overrides):
    return project.cell_of(resolve_cell(compose_cfg(*overrides)))


def cell_record(cell, job_dir, **scores):
    """A cell's record as the harness hands it to W&B (``cell``: the ResolvedCell)."""
    record = {**cell.identity, "status": "failed", "error": "", "bleu": None, "job_dir": str(job_dir),
              "config_hash": "abc123", "corpus": {"cache_key": "synthetic-0123", "sizes": {"train": 300}}}
    record.update(scores)
    return Record.from_dict(record)


def run_cell_through_wandb(cell, job_dir, record, lines=TRAIN_LOG):
    run = start_cell_run(cell, job_dir, record, git_commit="deadbeef")
    for line in lines:
        run.on_train_line(line)
    run.finish(record)
    flush_wandb()


def flush_wandb():
    """W&B's service writes the run file after ``finish`` returns; it is complete once the service
    has shut down (as at the end of a posenc-run process)."""
    import wandb
    wandb.teardown()


def test_fairseq_records_become_curves_named_as_fairseqs_wandb_wrapper_names_them():
    steps = [wandb_metrics(*parse_record(line)) for line in TRAIN_LOG[:3]]
    assert steps[0][0] == 2 and steps[0][1]["train_inner/loss"] == 8.5 and steps[0][1]["train_inner/wps"] == 6000.1
    assert steps[1] == (3, {"valid/loss": 7.803, "valid/nll_loss": 7.692, "valid/ppl": 206.78, "valid/wps": 0.0,
                            "valid/wpb": 549.0, "valid/bsz": 40.0})
    assert steps[2][0] == 3 and steps[2][1]["train/lr"] == 0.002 and "train/num_updates" not in steps[2][1]
    assert parse_record(TRAIN_LOG[3]) is None


def test_one_cell_is_one_offline_run_with_its_config_curves_and_scores(tmp_path):
    cfg = compose_cell("logger=wandb", "placement=source", "seed=2")
    job_dir = tmp_path / "sweep" / "placement=source,seed=2"
    record = cell_record(cfg, job_dir, status="ok", bleu=12.34, tok_bleu=12.5, valid_ppl=206.78, bleu_test_long=3.2,
                         num_updates=3)
    run_cell_through_wandb(cfg, job_dir, record)
    runs = offline_runs(tmp_path / "sweep" / "wandb")  # W&B's files sit in the sweep directory
    assert len(runs) == 1
    (rid, run), = runs.items()
    token = sweep_token(tmp_path / "sweep")
    assert rid == run_id(token, "placement=source,seed=2", "abc123")
    assert run.name == "placement=source,seed=2" and run.job_type == "cell"
    assert run.group == group_name("single", str(tmp_path / "sweep"), token) == f"single:sweep:{token}"
    assert str(tmp_path) not in run.group  # the sweep's name, never a path of this machine
    assert run.project == "posenc" and run.notes == ""
    assert set(run.tags) == {"model=fconv_small", "data=synthetic", "pe=learned", "placement=source"}
    config = run.config
    assert (config["placement"], config["seed"], config["pe"]) == ("source", 2, "learned")
    assert config["model"]["arch"] == "posenc_fconv_small" and config["budget"]["name"] == "cpu"
    assert (config["encoder_pos"], config["decoder_pos"]) == ("learned", "none")
    assert config["corpus_key"] == "synthetic-0123" and config["git_commit"] == "deadbeef"
    assert run.values("valid/ppl") == [(3, 206.78)] and run.values("train_inner/loss") == [(2, 8.5)]
    summary = run.summary
    assert (summary["bleu"], summary["tok_bleu"], summary["valid_ppl"], summary["bleu_test_long"],
            summary["status"]) == \
        (12.34, 12.5, 206.78, 3.2, "ok")
    assert "job_dir" not in summary and "corpus" not in summary
    assert run.exit_codes == [0]


def test_a_failed_cell_is_a_failed_run_and_a_rerun_continues_the_same_run(tmp_path):
    cfg = compose_cell("logger=wandb", "placement=none")
    job_dir = tmp_path / "sweep" / "placement=none"
    failed = cell_record(cfg, job_dir, error="fairseq-train exited with status 1: boom")
    run_cell_through_wandb(cfg, job_dir, failed, lines=TRAIN_LOG[:1])
    ok = cell_record(cfg, job_dir, status="ok", bleu=20.0)
    run_cell_through_wandb(cfg, job_dir, ok)
    runs = offline_runs(tmp_path / "sweep" / "wandb")
    assert len(runs) == 1  # the rerun wrote into the same run id
    run = next(iter(runs.values()))
    assert len(run.files) == 2 and run.exit_codes == [1, 0]
    assert run.summary["status"] == "ok" and run.summary["bleu"] == 20.0
    # A changed configuration retrains from scratch: a run of its own, same name.
    changed = cell_record(cfg, job_dir, status="ok", bleu=21.0, config_hash="fff999")
    run_cell_through_wandb(cfg, job_dir, changed)
    runs = offline_runs(tmp_path / "sweep" / "wandb")
    assert len(runs) == 2 and {r.name for r in runs.values()} == {"placement=none"}


def test_a_cell_finished_without_wandb_gets_its_run_once_from_what_it_kept(tmp_path):
    cfg = compose_cell("logger=wandb", "placement=target")
    job_dir = tmp_path / "sweep" / "placement=target"
    job_dir.mkdir(parents=True)
    (job_dir / "train.log").write_text("".join(TRAIN_LOG))
    (job_dir / "provenance.json").write_text(json.dumps({"git_commit": "cafe01"}))
    record = cell_record(cfg, job_dir, status="ok", bleu=30.5)
    log_finished_cell(cfg, job_dir, record)
    flush_wandb()
    log_finished_cell(cfg, job_dir, record)  # logged already: nothing new
    flush_wandb()
    runs = offline_runs(tmp_path / "sweep" / "wandb")
    (run,) = runs.values()
    assert len(run.files) == 1 and run.name == "placement=target"
    assert run.values("valid/ppl") == [(3, 206.78)] and run.summary["bleu"] == 30.5
    assert run.config["git_commit"] == "cafe01" and run.exit_codes == [0]
    log_finished_cell(compose_cell("placement=target"), job_dir, record)  # logger=none: nothing
    assert len(list((tmp_path / "sweep" / "wandb").glob("offline-run-*"))) == 1


def test_wandb_variables_win_over_the_config(tmp_path, monkeypatch):
    cfg = compose_cfg("logger=wandb", "logger.project=from-config", "logger.mode=online", "logger.entity=team-a")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    monkeypatch.setenv("WANDB_ENTITY", "team-b")
    kwargs = init_kwargs(cfg.logger, id="x", dir=str(tmp_path))
    assert "project" not in kwargs and "mode" not in kwargs and "entity" not in kwargs and \
        kwargs["dir"] == str(tmp_path)
    job_dir = tmp_path / "sweep" / "seed=1"
    cell = project.cell_of(resolve_cell(cfg))
    run_cell_through_wandb(cell, job_dir, cell_record(cell, job_dir, status="ok", bleu=1.0))
    run = next(iter(offline_runs(tmp_path / "sweep" / "wandb").values()))
    assert run.project == "from-env"  # and logger.mode=online did not beat WANDB_MODE=offline: the run is offline
    monkeypatch.delenv("WANDB_PROJECT")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    kwargs = init_kwargs(cfg.logger, dir=str(tmp_path))
    assert kwargs["project"] == "from-config" and "dir" not in kwargs


def the_run(cell, tmp_path, name="seed=1"):
    job_dir = tmp_path / "sweep" / name
    run_cell_through_wandb(cell, job_dir, cell_record(cell, job_dir, status="ok", bleu=1.0))
    (run,) = [r for r in offline_runs(tmp_path / "sweep" / "wandb").values() if r.name == name]
    return run


OWN_TAGS = {"model=fconv_small", "data=synthetic", "pe=learned", "placement=both"}


def test_the_users_group_tags_and_notes(tmp_path):
    cell = compose_cell("logger=wandb", "logger.group=lr-study", "logger.tags=[baseline,v2]",
                        "logger.notes='after the tokenizer fix'")
    run = the_run(cell, tmp_path)
    assert (run.group, run.notes) == ("lr-study", "after the tokenizer fix")
    assert set(run.tags) == OWN_TAGS | {"baseline", "v2"}  # added to the project's own


def test_wandb_run_group_tags_and_notes_win_over_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_RUN_GROUP", "from-env")
    monkeypatch.setenv("WANDB_TAGS", "env-a,env-b")
    monkeypatch.setenv("WANDB_NOTES", "noted in the environment")
    cell = compose_cell("logger=wandb", "logger.group=lr-study", "logger.tags=[baseline]", "logger.notes=mine")
    run = the_run(cell, tmp_path)
    assert (run.group, run.notes) == ("from-env", "noted in the environment")
    assert set(run.tags) == OWN_TAGS | {"env-a", "env-b"}  # WANDB_TAGS replaces logger.tags, never the own tags


@pytest.mark.parametrize("override,allowed", [("logger.tags=baseline", "allowed: a list"),
                                              (f"logger.tags=[{'x' * 65}]", "W&B allows at most 64"),
                                              (f"logger.group={'g' * 129}", "at most 128 characters")])
def test_a_bad_group_or_tag_is_refused_in_one_line(override, allowed):
    resolved = resolve_cell(compose_cfg("logger=wandb", override))
    assert resolved.refused is not None and allowed in str(resolved.refused) and "\n" not in str(resolved.refused)


def test_logger_none_logs_nothing(tmp_path):
    cfg = compose_cell()
    run_cell_through_wandb(cfg, tmp_path / "cell", cell_record(cfg, tmp_path / "cell", status="ok", bleu=1.0))
    assert not list(tmp_path.rglob("*.wandb"))


def test_sweep_token_is_shared_by_the_cells_and_new_for_a_new_sweep(tmp_path):
    assert sweep_token(tmp_path / "a") == sweep_token(tmp_path / "a")
    assert sweep_token(tmp_path / "a") != sweep_token(tmp_path / "b")
    assert len(group_name("table4", "x" * 300, "abcd1234")) <= 128


def test_the_sweep_table_goes_to_a_table_run_of_the_group(tmp_path):
    sweep = tmp_path / "sweep"
    config = compose_cfg("logger=wandb", "experiment=table4", f"hydra.sweep.dir={sweep}", hydra=True)
    for placement, seed, bleu in (("both", 1, 20.0), ("both", 2, 22.0), ("none", 1, 19.0)):
        cell = sweep / f"placement={placement},seed={seed}"
        cell.mkdir(parents=True)
        record = {"experiment": "table4", "model": "fconv_small", "data": "synthetic", "pe": "learned",
                  "placement": placement, "seed": seed, "status": "ok", "bleu": bleu, "tok_bleu": bleu,
                  "valid_ppl": 2.0}
        (cell / "result.json").write_text(json.dumps(record))
    (sweep / "plots").mkdir()
    _png(sweep / "plots" / "bleu_by_placement.png")
    report = sweep_end_report(read_sweep(sweep))
    log_sweep_table(config, report)
    flush_wandb()
    runs = offline_runs(sweep / "wandb")
    (run,) = runs.values()
    assert run.job_type == "table" and run.name == "table"
    assert run.group == group_name("table4", str(sweep), sweep_token(sweep)) == f"table4:sweep:{sweep_token(sweep)}"
    (_, logged), = [(s, v) for s, v in run.history if "results.path" in v]  # nested keys, dotted
    assert logged["results._type"] == "table-file" and logged["results.nrows"] == 2
    table_file = next((sweep / "wandb").glob(f"offline-run-*/files/{logged['results.path']}"))
    table = json.loads(table_file.read_text())
    rows = table_rows(sweep, SWEEP_END)
    assert table["columns"] == list(rows[0]) and "seeds_needed" in table["columns"]  # the power columns too
    assert [dict(zip(table["columns"], row))["placement"] for row in table["data"]] == ["both", "none"]
    assert dict(zip(table["columns"], table["data"][0]))["bleu"] == 21.0
    assert logged["figures/bleu_by_placement._type"] == "image-file"
    assert run.summary["cells_ok"] == 3 and run.exit_codes == [0]


def _png(path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(1, 1))
    fig.savefig(path)
    plt.close(fig)


def test_online_without_a_login_is_one_line_before_any_training(tmp_path, monkeypatch):
    from posenc.harness.errors import ConfigError
    for name in ("WANDB_API_KEY", "WANDB_SILENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc, no W&B settings of the developer's
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    cfg = compose_cell("logger=wandb")
    with pytest.raises(ConfigError) as err:
        start_cell_run(cfg, tmp_path / "sweep" / "seed=1", cell_record(cfg, tmp_path), git_commit="x")
    message = str(err.value)
    assert message.startswith("logger=wandb: W&B could not start a run: ") and "\n" not in message
    assert message.endswith("(log in with `wandb login` or WANDB_API_KEY, or run with WANDB_MODE=offline)")


def test_the_runs_summary_names_the_device_that_trained_the_cell():
    """A GPU cell's run says which GPU (issue 47: every record said cpu)."""
    log = (Path(__file__).parent / "fixtures" / "train_log_h200.log").read_text(encoding="utf-8").splitlines()
    record = Record(status="ok", **{k: v for k, v in training_fields(log).items() if k == "device"})
    assert cell_summary(record)["device"] == "cuda: NVIDIA H200 x1"


@pytest.mark.slow
def test_posenc_run_with_the_users_labels_and_wandbs_variables(tmp_path):
    """As a user types it: a smoke cell with logger.group/tags/notes, then W&B's variables over them."""
    args = ("-m", "budget=smoke", "budget.max_update=2", "logger=wandb", "logger.group=lr-study",
            "logger.tags=[baseline]", "logger.notes=first")
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "HOME": str(tmp_path)}
    proc = project.posenc_run(*args, "hydra.sweep.dir=mine", cwd=tmp_path, cache=tmp_path / "cache", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    env.update(WANDB_RUN_GROUP="env-group", WANDB_TAGS="env-tag", WANDB_NOTES="env note")
    proc = project.posenc_run(*args, "hydra.sweep.dir=theirs", cwd=tmp_path, cache=tmp_path / "cache", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = {"model=fconv_small", "data=synthetic", "pe=learned", "placement=both"}
    for sweep, group, tags, notes in (("mine", "lr-study", {"baseline"}, "first"),
                                      ("theirs", "env-group", {"env-tag"}, "env note")):
        runs = offline_runs(tmp_path / sweep / "wandb").values()
        assert {(r.job_type, r.group, r.notes) for r in runs} == {("cell", group, notes), ("table", group, notes)}
        cell = next(r for r in runs if r.job_type == "cell")
        assert set(cell.tags) == own | tags
