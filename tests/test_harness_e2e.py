"""posenc-run end to end on a small generated corpus: a smoke sweep, resuming, failures, tables."""

import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.report.references import CONVS2S
from posenc.trainer.decode import DECODE_FLAG
from project import REPO, posenc_run, summary_line

BIN = Path(sys.executable).parent
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
CONTRACT_FIELDS = ["experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "status",
                   "error", "bleu", "bleu_signature", "tok_bleu", "valid_ppl", "test_sentences", "num_updates",
                   "train_wall_s", "hypotheses", "job_dir"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("harness")
    return root, root / "cache"


@pytest.fixture(scope="module")
def smoke_sweep(workspace):
    root, cache = workspace
    sweep = root / "sweep"
    proc = posenc_run("-m", "experiment=table4", "budget=smoke", "seed=1", *SMALL_DATA, f"hydra.sweep.dir={sweep}",
                      cwd=root, cache=cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep, proc


def test_smoke_sweep_writes_every_cell_and_the_tables(smoke_sweep):
    sweep, proc = smoke_sweep
    cells = sorted(p.parent.name for p in sweep.glob("*/result.json"))
    # Named from the cell's own overrides (Hydra sorts them), not from a job number.
    assert cells == sorted(",".join(sorted(["budget=smoke", *SMALL_DATA, f"placement={p}", "seed=1"]))
                           for p in ("both", "source", "target", "none"))
    with open(sweep / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert list(rows[0])[: len(CONTRACT_FIELDS)] == CONTRACT_FIELDS
    assert {r["placement"] for r in rows} == {"both", "source", "target", "none"}
    assert {(r["placement"], r["encoder_pos"], r["decoder_pos"]) for r in rows} == {
        ("both", "learned", "learned"), ("source", "learned", "none"), ("target", "none", "learned"),
        ("none", "none", "none")}
    table = (sweep / "table.md").read_text()
    # The paper's own Δ beside the row it describes (Table 4: none - both = 21.2 - 21.7), not its absolute BLEU
    assert "| fconv_small | learned | synthetic | neither | -0.5 |" in table and "n/a: one paired seed" in table
    assert "cell 4/4" in proc.stderr and "epoch 1" in proc.stderr  # progress lines


def test_the_main_jobs_answer_shows_the_papers_delta_beside_ours(smoke_sweep):
    """make table4's sweep ends with the compact table, the paper's Δ beside ours for each compared
    placement (Table 4: source -0.2, target -0.4, none -0.5 against both), then table.md's path."""
    sweep, proc = smoke_sweep
    lines = proc.stdout.rstrip("\n").splitlines()
    answer = lines[lines.index(summary_line(proc.stdout)) + 1:-1]
    assert lines[-1] == f"Every table and note: {sweep / 'table.md'}"
    assert all(len(line) <= 100 for line in answer), answer
    assert "paper Δ: Gehring et al. (2017) Table 4, tokenized BLEU on WMT'14 En-De newstest2014" in answer
    header, _, *body = [line for line in answer if line.startswith("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[2:4] == ["Δ [CI]", "paper Δ"], columns
    paper = {row["placement"]: float(row["bleu"]) for row in csv.DictReader(CONVS2S.read_text().splitlines())}
    cells = {c[0]: c for c in ([x.strip() for x in line.strip("|").split("|")] for line in body)}
    assert cells["placement=both"][3] == "-" and cells["placement=both"][2] == "baseline"
    for placement in ("source", "target", "none"):
        assert float(cells[f"placement={placement}"][3]) == pytest.approx(paper[placement] - paper["both"])


def test_every_cell_translated_every_test_sentence(smoke_sweep):
    sweep, _ = smoke_sweep
    for result in sweep.glob("*/result.json"):
        record = json.loads(result.read_text())
        assert record["status"] == "ok", record["error"]
        assert record["test_sentences"] == 37
        assert record["stopped_by"] == "max_epoch"  # budget=smoke: one short epoch, under its 20 updates
        assert len((result.parent / record["hypotheses"]).read_text().splitlines()) == 37
        assert record["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        assert 0 <= record["chrf"] <= 100 and "nw:2" in record["chrf_signature"]   # chrF++
        commands = (result.parent / "commands.sh").read_text()
        assert "-m posenc.trainer.train" in commands and "-m fairseq_cli.generate" in commands
        assert json.loads((result.parent / "provenance.json").read_text())["packages"]["fairseq-fixed"] == "0.12.3.1"


def test_each_placement_decoded_in_the_trainer_exactly_as_fairseq_generate(smoke_sweep):
    """scripts/check_decoding.py as a user runs it after a sweep: each cell's stock fairseq-generate
    line of commands.sh, run by hand on its checkpoint, prints every per-sentence line byte for byte
    as the trainer wrote it (tests/test_decode_in_trainer.py: why, and the Transformer's beam 5)."""
    sweep, _ = smoke_sweep
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "check_decoding.py"), str(sweep)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[-1] == "4 cells: all identical", proc.stdout
    assert sum(f" test ({5 * 37} lines): identical" in line for line in lines) == 4, proc.stdout  # S, T, H, D, P
    for cell in sweep.glob("*/result.json"):  # commands.sh: the stock command lines, without the decoding plan
        assert DECODE_FLAG not in (cell.parent / "commands.sh").read_text()


def test_rerun_resumes_without_retraining(smoke_sweep, workspace):
    sweep, _ = smoke_sweep
    root, cache = workspace
    killed = next(sweep.glob("*placement=source*"))
    (killed / "result.json").unlink()  # as if the sweep had been killed during this cell
    kept = {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")}
    proc = posenc_run("-m", "experiment=table4", "budget=smoke", "seed=1", *SMALL_DATA, f"hydra.sweep.dir={sweep}",
                      cwd=root, cache=cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())
    assert json.loads((killed / "result.json").read_text())["status"] == "ok"
    assert proc.stderr.count("; kept") == 3  # the three finished cells, untouched
    # The killed cell had finished training before it was killed: it is scored, not retrained.
    assert "scoring it without retraining" in proc.stderr and "training posenc_" not in proc.stderr


def test_posenc_table_lists_missing_and_failed_cells(smoke_sweep, tmp_path):
    sweep, _ = smoke_sweep
    copy = tmp_path / "copy"
    shutil.copytree(sweep, copy)
    shutil.rmtree(next(copy.glob("*placement=target*")))
    failed = next(copy.glob("*placement=none*")) / "result.json"
    record = json.loads(failed.read_text())
    record.update(status="failed", error="fairseq-train exited with status 1: boom")
    failed.write_text(json.dumps(record))
    out = subprocess.run([str(BIN / "posenc-table"), str(copy)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "MISSING budget=smoke" in out.stdout and "placement=target" in out.stdout
    assert "FAILED" in out.stdout and "boom" in out.stdout
    for fmt, marker in (("csv", "placement,"), ("latex", r"\begin{tabular}")):
        out = subprocess.run([str(BIN / "posenc-table"), str(copy), "--format", fmt], capture_output=True, text=True,
                             timeout=60)
        assert marker in out.stdout


def test_a_cell_cut_short_by_the_time_cap_says_so(workspace):
    """budget.max_time_min stops fairseq mid-epoch (its --stop-time-hours): the cell is scored, but
    its progress, record and table all say that it did not train its planned epochs."""
    root, cache = workspace
    sweep = root / "capped"
    proc = posenc_run("-m", "budget=smoke", "placement=both", "budget.max_update=0", "budget.max_epoch=20",
                      "budget.max_time_min=0.0001", *SMALL_DATA, f"hydra.sweep.dir={sweep}", cwd=root, cache=cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(next(sweep.glob("*/result.json")).read_text())
    assert record["status"] == "ok" and record["stopped_by"] == "time_cap" and record["epochs"] < 20
    assert "WARNING: training stopped at the time cap (budget.max_time_min=0.0001)" in proc.stderr
    table = (sweep / "table.md").read_text()
    assert "1 (1 time-capped)" in table and "TIME-CAPPED" in table


def test_posenc_table_on_a_missing_directory_is_one_line(tmp_path):
    out = subprocess.run([str(BIN / "posenc-table"), str(tmp_path / "nope")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no such sweep directory" in out.stderr


def test_same_seed_same_config_same_result(workspace):
    root, cache = workspace
    records = []
    for name in ("a", "b"):
        proc = posenc_run("budget=smoke", "placement=target", "seed=3", *SMALL_DATA, f"hydra.run.dir={root / name}",
                          cwd=root, cache=cache)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records.append(json.loads((root / name / "result.json").read_text()))
    assert records[0]["valid_ppl"] == records[1]["valid_ppl"] and records[0]["bleu"] == records[1]["bleu"]
    assert (root / "a" / "hypotheses.txt").read_text() == (root / "b" / "hypotheses.txt").read_text()


def test_a_failing_cell_is_recorded_as_failed(workspace):
    root, cache = workspace
    started = time.monotonic()
    proc = posenc_run("budget=smoke", *SMALL_DATA, "+model.args.encoder_layers=not-a-layer-spec",
                      f"hydra.run.dir={root / 'bad'}", cwd=root, cache=cache)
    assert proc.returncode == 1
    record = json.loads((root / "bad" / "result.json").read_text())
    assert record["status"] == "failed" and "fairseq-train exited with status" in record["error"]
    assert "\n" not in record["error"] and time.monotonic() - started < 300
