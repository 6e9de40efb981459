"""One home for a cell: the record's schema (old records included), the keys that never change a
result, and one reader of a sweep that the summary line, the ETA, posenc-table and posenc-pe sweep
share, so they agree on what a cell is (a nested one too)."""

import json
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from sacrebleu.metrics import BLEU

from posenc import metrics
from posenc.cells import keys, layout
from posenc.cells.record import FAILED, RUNNING, Record, Split, bleu_options, config_family, family, field, new_record
from posenc.cells.sweep import SweepError, read_sweep
from posenc.harness.app import sweep_eta
from posenc.harness.sweep.summary import summarize
from posenc.metrics import bleu_signature_options
from report_fixtures import write_plan

CONF = Path(__file__).resolve().parents[1] / "conf"
pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def test_a_record_starts_running_with_a_reason_and_a_refused_one_fails_with_its_own():
    running = new_record({"model": "fconv_small", "seed": 1}, Path("/c"), "fconv")
    assert running.status == RUNNING and running.error and running.family == "fconv"
    refused = new_record({"model": "x"}, Path("/c"), None, "pe='bad' is not allowed")
    assert (refused.status, refused.error) == (FAILED, "pe='bad' is not allowed")


def test_the_split_rule():
    assert (field("bleu", "test"), field("bleu", "test_long")) == ("bleu", "bleu_test_long")
    assert layout.hypotheses_file("test") == layout.HYPOTHESES_FILE
    assert layout.hypotheses_file("test_long", tokenized=True) == "hypotheses.test_long.tok.txt"


@pytest.mark.parametrize("lowercase", [False, True])
def test_recorded_bleu_options_are_what_old_records_parse_from_their_signature(lowercase):
    hyps, refs = ["The cat sat on the mat ."], ["The cat sat on a mat ."]
    metric = metrics.bleu(lowercase)
    (score, signature), options = metric.corpus_score(hyps, refs), metric.options
    new = Record(test=Split(bleu_signature=signature, bleu_options=options))
    old = Record.from_dict({"bleu_signature": signature})
    assert bleu_options(new) == bleu_options(old) == bleu_signature_options(signature)
    assert BLEU(**bleu_options(old)).corpus_score(hyps, [refs]).score == score
    long = Record(test_long=Split(bleu_signature=signature.replace("13a", "intl")))
    assert bleu_options(long, "test_long")["tokenize"] == "intl"


def test_the_family_is_the_records_and_old_records_read_their_model_config():
    assert family(Record(model="renamed_since", family="transformer")) == "transformer"
    assert family(Record(model="transformer_small")) == config_family("transformer_small") == "transformer"
    assert family(Record(model="no_such_model")) == "unknown"


def test_hydra_names_cells_with_the_one_list_and_table4s_names_keep_their_keys():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=table4"], return_hydra_config=True)
    resolved = list(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert resolved == keys.not_naming()
    before = {"experiment", "data.train", "data.valid", "data.test", "data.mirror", "paths.cache_dir", "progress",
              "logger", "logger.project", "logger.entity", "logger.mode", "redo", "runtime", "runtime.threads",
              "runtime.omp_wait_policy"}  # the list conf/config.yaml held before it read keys.py
    # and the keys added since, none of which existed when table4's cells were named
    assert set(resolved) - before == {"paths", "budget.step_timeout_min", "kinds_module", "runtime.cells_per_gpu",
                                      "logger.group", "logger.tags", "logger.notes", "data.dir",
                                      "data.references.test", "data.references.test_long",
                                      "runtime.deterministic", "runtime.warm_trainer"} \
        and before <= set(resolved)
    assert {"placement", "seed"}.isdisjoint(resolved)  # table4's swept keys still name its cells


def write_record(cell: Path, **fields):
    cell.mkdir(parents=True, exist_ok=True)
    record = {"status": "ok", "error": "", "bleu": 1.0, "cell_wall_s": 60.0, **fields}
    (cell / layout.RESULT_FILE).write_text(json.dumps(record), encoding="utf-8")


def test_every_reader_sees_a_nested_cell_and_an_unreadable_one(tmp_path):
    sweep = tmp_path / "sweep"
    write_record(sweep / "a")
    write_record(sweep / "deep" / "b", status="failed", error="boom")
    (sweep / "torn").mkdir(parents=True)
    (sweep / "torn" / layout.RESULT_FILE).write_text("{", encoding="utf-8")
    read = read_sweep(sweep)
    assert [c.name for c in read.cells] == ["a", "deep/b"] and read.unreadable == [("torn", "JSONDecodeError")]
    line, status = summarize(sweep)
    assert line == "3 cells: 1 ok, 1 failed: cell=deep/b (boom), 1 not run: cell=torn (result.json unreadable)"
    assert status == 1
    assert sweep_eta(read, 2) == pytest.approx(2.0)  # the one ok cell's minute, twice
    from posenc.analysis.measure.sweep import find_cells

    cells, notes = find_cells(sweep)
    assert [(c.name, c.status) for c in cells] == [("a", "ok"), ("deep/b", "failed"), ("torn", "unreadable")]
    assert notes == [read.plan_note] and "multirun.yaml" in notes[0]


def test_every_reader_reads_a_foreign_record_as_it_says_without_filling_it_in(tmp_path):
    """A result.json without a status or an error (foreign, or torn by hand) has neither for any
    reader: not a running cell with the harness's reason, and no columns results.csv invents."""
    from posenc.report.table import results_csv

    sweep = tmp_path / "sweep"
    write_record(sweep / "a")
    (sweep / "b").mkdir()
    (sweep / "b" / layout.RESULT_FILE).write_text(json.dumps({"bleu": 2.0, "note": "x"}), encoding="utf-8")
    read = read_sweep(sweep)
    assert [c.status for c in read.cells] == ["ok", "unknown"]
    assert summarize(read) == ("2 cells: 1 ok, 1 failed: cell=b (no reason recorded)", 1)
    header, first, second = results_csv(read).splitlines()
    assert header.endswith(",job_dir,cell_wall_s,note") and second.split(",")[8:10] == ["", ""]


def test_planned_cells_that_never_reported_are_missing_for_every_reader(tmp_path):
    sweep = tmp_path / "sweep"
    write_plan(sweep, {"placement": "both,none", "seed": "1"}, ["experiment=table4"])
    write_record(sweep / "placement=both,seed=1")
    write_record(sweep / "leftover", status="failed", error="an earlier plan's cell")
    read = read_sweep(sweep)
    assert read.planned and read.missing == ["placement=none,seed=1"]
    assert summarize(sweep) == ("2 cells: 1 ok, 1 not run: placement=none", 1)
    from posenc.analysis.measure.sweep import find_cells

    statuses = {c.name: c.status for c in find_cells(sweep)[0]}
    assert statuses == {"leftover": "failed", "placement=both,seed=1": "ok", "placement=none,seed=1": "missing"}


def test_a_broken_plan_never_hides_the_cells_that_reported(tmp_path):
    sweep = tmp_path / "sweep"
    write_record(sweep / "a")
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {}}), encoding="utf-8")
    read = read_sweep(sweep)
    assert not read.planned and "could not be read" in read.plan_note and [c.name for c in read.cells] == ["a"]


def test_no_sweep_is_one_line(tmp_path):
    with pytest.raises(SweepError, match="no such sweep directory"):
        read_sweep(tmp_path / "nothing")
    with pytest.raises(SweepError, match="no result.json below it and no multirun.yaml plan"):
        read_sweep(tmp_path).require_cells()


def test_a_torn_record_says_why(tmp_path):
    (tmp_path / layout.RESULT_FILE).write_text("[1]", encoding="utf-8")
    assert Record.read_why(tmp_path) == (None, "not a JSON object")
    assert Record.read_why(tmp_path / "absent") == (None, "")
