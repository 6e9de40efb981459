"""``hydra/sweeper=posenc_tune``: each row tunes its own learning rate by an Optuna study, with real
cells on the joblib launcher (smoke budget): trials never score test, a worse trial is pruned
with a save, the best values run their seeds; killed and rerun; and its refusals."""

import json
import re
import subprocess

import optuna
import pytest
from optuna.distributions import FloatDistribution

from posenc.cells.layout import RESULT_FILE
from posenc.cells.strategy import TUNE_FILE
from posenc.cells.sweep import read_sweep
from posenc.harness import study as studies
from project import BIN, summary_line
from test_seeds_sweeper import run, stopped_once

GRID = ["hydra/sweeper=posenc_tune", "budget=smoke", "placement=both,none", "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2"]
# Two learning rates a smoke cell tells apart in one epoch: sampler seed 2 proposes 0.003 first and
# 1e-05 second in both rows (posenc.harness.study.sampler), so the median pruner, with one finished
# trial to compare with, stops each row's second trial at the end of its first epoch.
PRUNED = ["hydra.sweeper.search_space={optim.args.lr: {choices: [0.003, 1e-05]}}", "hydra.sweeper.trials=2",
          "hydra.sweeper.sampler_seed=2", "hydra.sweeper.pruner=median", "hydra.sweeper.pruner_startup_trials=1",
          "hydra.sweeper.seeds=1", "budget.max_epoch=2", "budget.max_update=0"]


def state(sweep):
    return json.loads((sweep / TUNE_FILE).read_text())


def trial_dirs(sweep):
    return sorted(p for p in sweep.iterdir() if p.is_dir() and ",trial=" in p.name)


@pytest.mark.parametrize("args,message", [
    ([], "hydra.sweeper.search_space is empty; allowed: one or more keys"),
    (["hydra.sweeper.search_space={optim.args.lrr: {low: 1e-4, high: 1e-2}}"],
     "hydra.sweeper.search_space.optim.args.lrr: Could not override 'optim.args.lrr' (row placement=both); "
     "allowed: a key of the cell's config, or +key for a new one"),
    (["hydra.sweeper.search_space={optim.args.lr: {low: 1e-2, high: 1e-4, log: true}}"],
     "hydra.sweeper.search_space.optim.args.lr: low=0.01 is not below high=0.0001; allowed: low < high"),
    (["hydra.sweeper.search_space={placement: {choices: [both]}}"],
     "hydra.sweeper.search_space.placement: the grid sets placement too"),
    (["hydra.sweeper.search_space={optim.args.lr: {low: 1e-4, high: 1e-2}}", "seed=1,2"],
     "seed=1,2: the tune strategy sets seed itself"),
    (["hydra.sweeper.search_space={optim.args.lr: {low: 1e-4, high: 1e-2}}", "hydra.sweeper.pruner=hyperband"],
     "hydra.sweeper.pruner='hyperband' is not allowed; allowed: null, median, asha"),
    (["hydra.sweeper.search_space={optim.args.lr: {low: 1e-4, high: 1e-2}}",
      "hydra.sweeper.seeds_strategy={effect: 0}"],
     "hydra.sweeper.effect=0 is not allowed; allowed: a BLEU difference > 0"),
    (["hydra.sweeper.search_space={optim.args.lr: {low: 1e-4, high: 1e-2}}",
      "hydra.sweeper.seeds_strategy={effects: 1}"],
     "hydra.sweeper.seeds_strategy: effects is not a setting of the seeds strategy; allowed: null or a dict of "),
])
def test_bad_settings_are_one_line_and_nothing_runs(tmp_path, args, message):
    sweep = tmp_path / "sweep"
    out = run(sweep, tmp_path / "cache", *GRID, *args, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"posenc-run: error: {message}"), line
    assert not sweep.exists()  # nothing started, not even the sweep directory


@pytest.mark.slow
def test_a_sweeper_stopped_mid_study_continues_with_the_same_proposals(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    space = {"optim.args.lr": {"low": 1e-4, "high": 1e-2, "log": True}}
    args = (*GRID, "hydra.sweeper.search_space={optim.args.lr: {low: 1e-4, high: 1e-2, log: true}}",
            "hydra.sweeper.trials=3", "hydra.sweeper.seeds=1", "budget.max_epoch=2")
    stopped_once(sweep, cache, args, "*trial=1/train.log")  # the second batch is training
    first = {p: p.stat().st_mtime_ns for p in sweep.glob("*trial=0/result.json")}
    assert len(first) == 2 and all(json.loads(p.read_text())["status"] == "ok" for p in first)
    again = run(sweep, cache, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in first} == first  # the finished trials are not trained again
    batches = [line for line in (again.stdout + again.stderr).splitlines() if "tune strategy: batch of" in line]
    assert "placement=both trial=1; placement=none trial=1" in batches[0], batches  # the interrupted ones, resumed
    got = state(sweep)
    # The proposals are the seeded sampler's whatever happened to the sweeper: each row's trials
    # (all from TPE's random start-up here, so independent of the losses) are what it proposes afresh.
    distribution = {"optim.args.lr": FloatDistribution(1e-4, 1e-2, log=True)}
    for index, row in enumerate(got["rows"]):
        fresh = optuna.create_study()
        expected = []
        for number in range(3):
            fresh.sampler = studies.sampler(0, index, number, startup_trials=4)
            trial = fresh.ask(distribution)
            expected.append(f"{trial.params['optim.args.lr']:.4g}")
            fresh.tell(trial, 1.0)
        assert [t["values"]["optim.args.lr"] for t in row["trials"]] == expected, (row["row"], space)
        assert [t["state"] for t in row["trials"]] == ["COMPLETE"] * 3
    # Every trial is one cell, trained in one directory; none ran twice from scratch.
    names = [t["dirname"] for r in got["rows"] for t in r["trials"]]
    assert len(names) == len(set(names)) == 6 and len(trial_dirs(sweep)) == 6
    for trial in trial_dirs(sweep):
        assert (trial / "train.log").read_text().count("posenc: training stopped on request") <= 1
    assert {c.status for c in read_sweep(sweep).every_cell()} == {"ok"}


@pytest.mark.slow
def test_rows_tune_prune_and_size_their_best_values_seeds_by_the_seeds_strategy_and_trials_never_score_test(
        tmp_path):
    """hydra.sweeper.seeds_strategy instead of a fixed count: the tuned rows' seeds are decided as the
    seeds strategy's group sequential design decides them (looks at 2 and 3 seeds; smoke cells of
    one learning rate differ by hundredths of a BLEU, so the compared row runs on to max_seeds).
    A fixed count (hydra.sweeper.seeds) runs in tests/test_slurm.py's tune test."""
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    plan = "hydra.sweeper.seeds_strategy={effect: 0.01, pilot_seeds: 2, max_seeds: 3, batch_seeds: 1}"
    out = run(sweep, cache, *GRID, *PRUNED, plan)
    assert out.returncode == 0, out.stderr[-3000:]
    got = state(sweep)
    for row in got["rows"]:
        assert [(t["values"]["optim.args.lr"], t["state"]) for t in row["trials"]] == \
            [("0.003", "COMPLETE"), ("1e-05", "PRUNED")], row
        assert row["best"]["values"] == {"optim.args.lr": "0.003"} and row["seeds"] == [1, 2, 3], row
    # A pruned trial: its record says so and why, training stopped with a save, its checkpoints are kept.
    for trial in trial_dirs(sweep):
        record = json.loads((trial / RESULT_FILE).read_text())
        if "trial=1" in trial.name:
            assert record["status"] == "pruned" and record["epochs"] == 1, record
            assert record["error"].startswith("pruned by the median pruner at the end of epoch 1: validation loss ")
            assert (trial / "checkpoints" / "checkpoint_last.pt").stat().st_size > 0
            assert "training stopped on request, checkpoint saved" in (trial / "train.log").read_text()
        else:
            assert record["status"] == "ok" and record["valid_loss"] > 0
        # No trial ever scored the test split: no decoding, no output, no score, not even a command for it.
        assert record["bleu"] is None and record["test_sentences"] is None and record["trial"] in (0, 1)
        assert not list(trial.glob("generate*")) and not list(trial.glob("hypotheses*"))
        assert "fairseq-generate" not in (trial / "commands.sh").read_text()
    none = next(r for r in got["rows"] if r["row"] == "placement=none")
    assert [look["n"] for look in none["plan"]["looks"]] == [2, 3]
    assert (none["plan"]["stopped"], none["plan"]["why"], none["plan"]["verdict"]) == \
        ("max_seeds", "max_seeds", "no evidence")
    logged = out.stdout + out.stderr
    batches = [line.split("batch of ")[1].split()[0] for line in logged.splitlines()
               if "the best values' seeds by the seeds strategy, batch of" in line]
    assert batches == ["4", "2"], batches  # the pilot of both rows, then one more seed each
    # The table is the best values' own seeds, scored as any cell, and says how each row was tuned.
    read = read_sweep(sweep)
    assert sorted(c.name for c in read.cells) == [
        f"budget.max_epoch=2,budget.max_update=0,budget=smoke,optim.args.lr=0.003,placement={p},seed={s}"
        for p in ("both", "none") for s in (1, 2, 3)]
    assert {c.status for c in read.every_cell()} == {"ok"} and len(read.trials) == 4
    assert all(c.record.bleu is not None for c in read.cells)
    table = (sweep / "table.md").read_text()
    assert "Tuned rows (hydra/sweeper=posenc_tune)" in table and "| placement=none | optim.args.lr=0.003 | 0 (" in table
    assert "sized by the seeds strategy (|Δ| = 0.01 BLEU against placement=both, 2 pilot seeds" in table
    assert "| 3 (max_seeds) |" in table  # the tuned rows' seeds and why they stopped
    rows = subprocess.run([str(BIN / "posenc-table"), str(sweep), "--format", "csv"], capture_output=True, text=True)
    header, *lines = rows.stdout.splitlines()
    tuned = header.split(",").index("tuned")
    chosen = [line.split(",")[tuned] for line in lines if line and not line.startswith("#")]
    assert chosen == ["optim.args.lr=0.003"] * 2
    summary = summary_line(out.stdout)
    assert summary.startswith("6 cells: 6 ok; tune strategy: placement=both 2 trials (1 pruned), "
                              "best optim.args.lr=0.003"), summary
    assert "; placement=none 2 trials (1 pruned), best optim.args.lr=0.003" in summary, summary
    # The answer last: the tuned row's seeds where the seeds strategy stopped them, then the path of table.md.
    lines = out.stdout.rstrip("\n").splitlines()
    answer = lines[lines.index(summary) + 1:]
    # The table fits 100 columns; the path line after it is as long as the path.
    assert answer[-1] == f"Every table and note: {sweep / 'table.md'}", answer
    assert all(len(x) <= 100 for x in answer[:-1]), answer
    none = next(x for x in answer if x.startswith("| placement=none "))
    assert re.search(r"\| no evidence: max_seeds( at 3 seeds)? +\| 3 +\|$", none), answer
    listed = subprocess.run([str(BIN / "posenc-table"), str(sweep), "--trials"], capture_output=True, text=True)
    assert listed.returncode == 0 and listed.stdout.count("| pruned |") == 2, listed.stdout + listed.stderr
    # The same command again: every study and every row is done, nothing is launched, nothing retrained.
    written = {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")}
    again = run(sweep, cache, *GRID, *PRUNED, plan)
    launched = [line for line in (again.stdout + again.stderr).splitlines()
                if "tune strategy: batch of" in line or "seeds strategy, batch of" in line]
    assert again.returncode == 0 and not launched, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")} == written
