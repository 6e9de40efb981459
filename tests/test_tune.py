"""The tune strategy's parts without training: its search spaces and their refusals, its seeded
proposals, a trial's pruning against a real Optuna journal, and how a tuned sweep is read and shown."""

import ast
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from posenc.cells.record import Record
from posenc.cells.strategy import STUDY_FILE, TUNE_FILE
from posenc.cells.sweep import read_sweep
from posenc.harness import study as studies
from posenc.harness.run.pruning import TrialPruning, trial_pruning
from posenc.harness.sweep.seeds import StrategyError
from posenc.harness.sweep.tune import override_text, space_distributions
from posenc.report.tuning import device_hours, trials_table, tune_table

optuna.logging.set_verbosity(optuna.logging.WARNING)
REPO = Path(__file__).resolve().parents[1]


def test_a_search_space_becomes_optuna_distributions():
    got = space_distributions({"optim.args.lr": {"low": 1e-4, "high": 1e-2, "log": True},
                               "optim.args.warmup_updates": {"type": "int", "low": 50, "high": 400},
                               "+model.args.dropout": {"low": 0.0, "high": 0.3},
                               "optim.args.lr_scheduler": {"choices": ["inverse_sqrt", "fixed"]}})
    assert got == {"optim.args.lr": FloatDistribution(1e-4, 1e-2, log=True),
                   "optim.args.warmup_updates": IntDistribution(50, 400),
                   "+model.args.dropout": FloatDistribution(0.0, 0.3),
                   "optim.args.lr_scheduler": CategoricalDistribution(["inverse_sqrt", "fixed"])}


@pytest.mark.parametrize("space,message", [
    ({}, "hydra.sweeper.search_space is empty; allowed: one or more keys"),
    (None, "hydra.sweeper.search_space is empty"),
    ({"optim.args.lr": {"low": 1e-2, "high": 1e-4}}, "hydra.sweeper.search_space.optim.args.lr: low=0.01 is not "
                                                     "below high=0.0001; allowed: low < high"),
    ({"optim.args.lr": {"low": 0, "high": 1e-2, "log": True}}, "low=0 on a log scale; allowed: low > 0"),
    ({"optim.args.lr": {"low": 1e-4, "hi": 1e-2}}, "'hi' is not a setting of a search space; allowed: choices, "
                                                   "high, log, low, type"),
    ({"optim.args.warmup_updates": {"type": "int", "low": 0.5, "high": 400}}, ".low=0.5 is not allowed; "
                                                                              "allowed: a whole number"),
    ({"optim.args.lr": {"type": "uniform", "low": 0, "high": 1}}, ".type='uniform' is not allowed; allowed: "
                                                                  "float, int, categorical"),
    ({"optim.args.lr": {"choices": []}}, ".choices=[] is not allowed; allowed: a non-empty list of values"),
    ({"optim.args.lr": 0.001}, "hydra.sweeper.search_space.optim.args.lr=0.001 is not allowed"),
])
def test_a_bad_search_space_is_one_line_naming_the_key(space, message):
    with pytest.raises(StrategyError) as err:
        space_distributions(space)
    text = str(err.value)
    assert text.startswith("hydra.sweeper.search_space") and message in text and "\n" not in text, text


def test_proposals_are_seeded_by_the_row_and_the_trial_not_by_the_process():
    space = {"lr": FloatDistribution(1e-4, 1e-2, log=True)}

    def proposals(seed, row):
        study = optuna.create_study()
        out = []
        for number in range(6):
            study.sampler = studies.sampler(seed, row, number, startup_trials=3)  # TPE after 3
            trial = study.ask(space)
            out.append(trial.params["lr"])
            study.tell(trial, (trial.params["lr"] - 1e-3) ** 2)
        return out
    first = proposals(0, 1)
    assert proposals(0, 1) == first  # the same history: the same values, TPE's included
    assert proposals(0, 2) != first and proposals(1, 1) != first
    assert override_text("optim.args.lr", first[0]) == f"optim.args.lr={first[0]:.4g}"
    assert override_text("x", 3) == "x=3"


def _journal_study(tmp_path, name="placement=none"):
    return studies.open_study(tmp_path, name)


def test_a_trial_worse_than_the_median_is_pruned_with_its_reason(tmp_path):
    study = _journal_study(tmp_path)
    space = {"lr": FloatDistribution(1e-4, 1e-2, log=True)}
    for loss in (4.0, 6.0):  # two finished trials, their epoch-1 losses 4 and 6: median 5
        trial = study.ask(space)
        trial.report(loss, 1)
        study.tell(trial, loss - 1)
    study.ask(space)  # trial 2: the one a cell runs
    pruner = studies.pruner("median", prune_from_epoch=1, startup_trials=2)
    handle = studies.trial_handle(tmp_path, "placement=none", 2, pruner)
    pruning = TrialPruning(handle, "median", handle.study)
    line = '2026-12-02 | INFO | valid | {"epoch": 1, "valid_loss": "%s", "valid_num_updates": "40"}'
    assert pruning.check("an ordinary line") is None
    assert pruning.check(line % "4.5") is None and pruning.reason == ""  # under the median: goes on
    again = TrialPruning(studies.trial_handle(tmp_path, "placement=none", 2, pruner), "median", handle.study)
    reason = again.check(line.replace('"epoch": 1', '"epoch": 2') % "9.0")  # no finished trial has epoch 2
    assert reason is None
    third = study.ask(space)
    pruning = TrialPruning(studies.trial_handle(tmp_path, "placement=none", third.number, pruner), "median", study)
    reason = pruning.check(line % "5.5")
    assert reason == ("pruned by the median pruner at the end of epoch 1: validation loss 5.500 (the median of "
                      "its row's finished trials there: 5.000); training stopped there with a save, its checkpoints "
                      "are kept")
    # What the cell reported is in the shared journal, as the sweeper reads it.
    reread = optuna.load_study(study_name="placement=none", storage=studies.storage(tmp_path))
    assert reread.trials[third.number].intermediate_values == {1: 5.5}


def test_a_cell_finds_its_trial_in_the_tune_state_and_only_then(tmp_path):
    study = _journal_study(tmp_path)
    study.ask({"lr": FloatDistribution(1e-4, 1e-2, log=True)})
    state = {"strategy": "tune", "settings": {"pruner": "median", "prune_from_epoch": 1, "pruner_startup_trials": 2},
             "trials": [{"dirname": "lr=0.001,trial=0", "study": "placement=none", "number": 0}], "cells": []}
    (tmp_path / TUNE_FILE).write_text(json.dumps(state))
    assert isinstance(trial_pruning(tmp_path, tmp_path / "lr=0.001,trial=0"), TrialPruning)
    assert trial_pruning(tmp_path, tmp_path / "lr=0.002,trial=1") is None  # not a trial of the state
    state["settings"]["pruner"] = None
    (tmp_path / TUNE_FILE).write_text(json.dumps(state))
    assert trial_pruning(tmp_path, tmp_path / "lr=0.001,trial=0") is None  # no pruner: nothing to report to
    assert (tmp_path / STUDY_FILE).exists()


def test_a_state_from_before_the_pruner_settings_prunes_with_their_defaults(tmp_path):
    """A tune state written before prune_from_epoch and pruner_startup_trials were settings ran
    their defaults then: its trial prunes as TuneSettings' defaults say (the median of two finished
    trials at epoch 1), and a state that names a setting runs that instead."""
    study = _journal_study(tmp_path)
    space = {"lr": FloatDistribution(1e-4, 1e-2, log=True)}
    for loss in (4.0, 6.0):
        trial = study.ask(space)
        trial.report(loss, 1)
        study.tell(trial, loss - 1)
    study.ask(space)
    line = '2026-12-02 | INFO | valid | {"epoch": 1, "valid_loss": "5.5", "valid_num_updates": "40"}'
    entry = {"dirname": "lr=0.001,trial=2", "study": "placement=none", "number": 2}
    for settings, pruned in (({"pruner": "median"}, True), ({"pruner": "median", "pruner_startup_trials": 3}, False)):
        (tmp_path / TUNE_FILE).write_text(json.dumps({"strategy": "tune", "settings": settings, "trials": [entry],
                                                      "cells": []}))
        assert (trial_pruning(tmp_path, tmp_path / entry["dirname"]).check(line) is not None) == pruned


def test_the_tune_settings_and_their_defaults_have_one_home():
    """The structured config Hydra stores is TuneSettings' fields with its defaults, beside the grid
    and the search space; a state that predates every setting reads None for each, and ran the default."""
    from dataclasses import asdict, fields

    from omegaconf import OmegaConf

    from posenc.cells.strategy import TuneSettings
    from posenc.harness.sweep.config import TuneSweeperConf

    conf = OmegaConf.to_container(OmegaConf.structured(TuneSweeperConf))
    assert set(conf) - {"_target_", "params", "search_space"} == {f.name for f in fields(TuneSettings)}
    assert {f.name: conf[f.name] for f in fields(TuneSettings)} == asdict(TuneSettings())
    old = TuneSettings.of({})
    assert all(getattr(old, f.name) is None for f in fields(TuneSettings))
    assert old.ran("prune_from_epoch") == TuneSettings().prune_from_epoch


def _cell(sweep_dir, name, **fields):
    record = Record(experiment="single", model="fconv_small", data="synthetic", pe="learned", seed=1,
                    encoder_pos="learned", decoder_pos="learned", family="fconv", **fields)
    (sweep_dir / name).mkdir(parents=True)
    if fields.get("trial") is None:
        record.bleu = 10.0
    record.succeed()
    record.write(sweep_dir / name)
    return record


def test_a_tuned_sweep_reads_its_trials_apart_and_its_tuned_values_are_no_rows(tmp_path):
    best = {"both": "0.003", "none": "0.001"}
    cells, rows = [], []
    for placement in ("both", "none"):
        trials = []
        for number, lr in enumerate(("0.003", "0.001")):
            name = f"optim.args.lr={lr},placement={placement},seed=0,trial={number}"
            _cell(tmp_path, name, placement=placement, trial=number, valid_loss=3.0 + number, cell_wall_s=1800,
                  device="cuda: NVIDIA H200 x2" if placement == "none" else "cpu")
            trials.append({"number": number, "dirname": name, "values": {"optim.args.lr": lr},
                           "state": "COMPLETE", "value": 3.0 + number})
        overrides = [f"placement={placement}"]
        final = f"optim.args.lr={best[placement]},placement={placement},seed=1"
        _cell(tmp_path, final, placement=placement)
        cells.append({"dirname": final, "overrides": overrides + [f"optim.args.lr={best[placement]}", "seed=1"]})
        rows.append({"row": f"placement={placement}", "overrides": overrides, "trials": trials, "seeds": [1],
                     "best": {"number": 0, "value": 3.0, "values": {"optim.args.lr": best[placement]}}})
    (tmp_path / "multirun.yaml").write_text("hydra: {}\n")
    (tmp_path / TUNE_FILE).write_text(json.dumps({
        "strategy": "tune", "rows": rows, "cells": cells, "search_space": {"optim.args.lr": {}},
        "settings": {"trials": 2, "seeds": 1, "pruner": None, "trial_seed": 0, "sampler_seed": 0,
                     "startup_trials": 4, "baseline": "placement=both"}}))
    sweep = read_sweep(tmp_path)
    assert sorted(c.name for c in sweep.trials) == sorted(t["dirname"] for r in rows for t in r["trials"])
    assert sorted(c.name for c in sweep.cells) == sorted(c["dirname"] for c in cells)
    assert sweep.extra_keys == []  # optim.args.lr differs between the rows, but it is what each row chose
    report = type("R", (), {"sweep": sweep})()
    _, body = tune_table(report)
    assert body[0][:4] == ["placement=both", "optim.args.lr=0.003", "0 (3.000)", "2: 2 ok"]
    assert body[0][4] == "1.00 CPU h" and body[1][4] == "2.00 GPU h"  # 2 trials x 0.5 h x 2 GPUs
    _, listed = trials_table(sweep)
    assert [r[:4] for r in listed][:2] == [["placement=both", "0", "optim.args.lr=0.003", "ok"],
                                           ["placement=both", "1", "optim.args.lr=0.001", "ok"]]


def test_device_hours_count_each_gpu():
    assert device_hours([Record(cell_wall_s=3600, device="cuda: NVIDIA H200 x2, NVIDIA A100 x1")]) == "3.00 GPU h"
    assert device_hours([Record(cell_wall_s=1800, device="cpu"), Record(cell_wall_s=3600, device="cuda: A x1")]) \
        == "1.00 GPU h + 0.50 CPU h"
    assert device_hours([]) == "0.00 CPU h"
    assert TrialState.COMPLETE.name == "COMPLETE"  # the state names the tune state keeps are Optuna's


def test_the_asha_pruner_stops_a_trial_outside_its_rungs_top_third(tmp_path):
    study = _journal_study(tmp_path, "placement=both")
    space = {"lr": FloatDistribution(1e-4, 1e-2, log=True)}
    pruner = studies.pruner("asha", prune_from_epoch=1)
    line = '2026-12-02 | INFO | valid | {"epoch": 1, "valid_loss": "%s", "valid_num_updates": "40"}'
    outcomes = []
    for loss in ("1.0", "1.1", "5.0"):  # rung 0 at epoch 1, reduction factor 3: the best third goes on
        trial = study.ask(space)
        pruning = TrialPruning(studies.trial_handle(tmp_path, "placement=both", trial.number, pruner), "asha", study)
        outcomes.append(pruning.check(line % loss))
        study.tell(trial, float(loss))
    assert outcomes[2] is not None and outcomes[2].startswith("pruned by the asha pruner at the end of epoch 1")
    assert studies.pruner(None).prune(study, study.trials[2]) is False  # no pruner: never


@pytest.mark.parametrize("value,space,flag", [
    # log10(0.0029 / 3e-4) / log10(10) = 0.985: the top 5% of the log range; 0.0026 sits at 0.938.
    ("0.0029", {"low": 3e-4, "high": 3e-3, "log": True}, "top"),
    ("0.0027", {"low": 3e-4, "high": 3e-3, "log": True}, "top"),      # 0.954
    ("0.0026", {"low": 3e-4, "high": 3e-3, "log": True}, None),       # 0.938
    ("0.00031", {"low": 3e-4, "high": 3e-3, "log": True}, "bottom"),  # 0.014
    # On a linear range the same values sit elsewhere: 0.0026 at 0.85, 0.0029 at 0.963, 0.0004 at 0.037.
    ("0.0026", {"low": 3e-4, "high": 3e-3}, None),
    ("0.0029", {"low": 3e-4, "high": 3e-3}, "top"),
    ("0.0004", {"low": 3e-4, "high": 3e-3}, "bottom"),
    ("0.0005", {"low": 3e-4, "high": 3e-3, "log": True}, None),       # 0.222 on the log scale
    ("0.0005", {"low": 3e-4, "high": 3e-3}, None),                    # 0.074 on the linear one
    ("4", {"low": 1, "high": 40, "type": "int"}, None),
    ("0.1", {"choices": [0.1, 0.3]}, None),                           # a categorical choice has no edge
])
def test_a_chosen_value_in_the_outer_5_percent_of_its_range_is_flagged(value, space, flag):
    from posenc.report.tuning import at_edge

    found = at_edge({"optim.args.lr": value}, {"optim.args.lr": space})
    if flag is None:
        assert found == []
    else:
        (line,) = found
        assert line.startswith(f"optim.args.lr={value} is in the {flag} 5% of its range")
        assert line.endswith("(log scale)") == bool(space.get("log"))


def test_the_tuned_table_and_the_summary_say_a_value_is_at_the_edge_and_to_widen_the_space():
    from types import SimpleNamespace

    from posenc.cells.strategy import BestTrial, Trial, TuneRow, TuneSettings, TuneState
    from posenc.harness.sweep.summary import strategy_summary
    from posenc.report.tuning import tune_notes

    rows = [TuneRow(f"placement={p}", [f"placement={p}"],
                    [Trial(0, f"t{p}", [], {"optim.args.lr": lr}, "COMPLETE", 3.0)],
                    BestTrial(0, 3.0, {"optim.args.lr": lr}), [1])
            for p, lr in (("both", "0.0029"), ("none", "0.001"))]
    state = TuneState(TuneSettings(trials=1, seeds=1, baseline="placement=both"),
                      {"optim.args.lr": {"low": 3e-4, "high": 3e-3, "log": True}}, rows, [])
    report = SimpleNamespace(sweep=SimpleNamespace(strategy=state, trials=[]))
    _, body = tune_table(report)
    assert body[0][1] == "optim.args.lr=0.0029 (at the edge of its range: widen it)"
    assert body[1][1] == "optim.args.lr=0.001"
    notes = tune_notes(report)
    assert notes[-1].startswith("At the edge of the search space")
    assert "placement=both: optim.args.lr=0.0029" in notes[-1]
    assert "placement=none" not in notes[-1] and "widen the search space" in notes[-1]
    summary = strategy_summary(state)
    assert ("placement=both 1 trials, best optim.args.lr=0.0029 (optim.args.lr=0.0029 is in the top 5% of its range "
            "0.0003..0.003 (log scale): the best value may lie beyond it, widen the search space)") in summary
    assert "placement=none 1 trials, best optim.args.lr=0.001;" not in summary and summary.endswith("0.001")


def test_an_old_tune_state_with_plans_of_the_old_rule_still_reads(tmp_path):
    """A tune state written before the group sequential design: its rows' plans ({planned, stopped,
    why}) read as old-rule rows, whose verdicts the table leaves to the fixed test."""
    from posenc.cells.strategy import TuneState, read_state
    from posenc.harness.sweep.summary import strategy_summary

    old = {"strategy": "tune", "search_space": {"optim.args.lr": {"low": 1e-4, "high": 1e-2, "log": True}},
           "settings": {"trials": 2, "seeds": 3, "pruner": None, "baseline": "placement=both",
                        "seeds_strategy": {"effect": 1.0, "pilot_seeds": 3, "max_seeds": 10, "batch_seeds": 2,
                                           "min_seeds": 7, "test_size": None, "baseline": "placement=both"}},
           "rows": [{"row": "placement=none", "overrides": ["placement=none"], "trials": [], "seeds": [1, 2, 3],
                     "best": {"number": 0, "value": 3.0, "values": {"optim.args.lr": "0.001"}},
                     "plan": {"planned": 5, "stopped": "plan", "why": "its plan books 5"}}],
           "trials": [], "cells": []}
    (tmp_path / TUNE_FILE).write_text(json.dumps(old))
    state = read_state(tmp_path)
    assert isinstance(state, TuneState) and state.rows[0].plan.planned == 5 and state.rows[0].plan.looks == []
    assert state.sequential_rows() == []
    assert strategy_summary(state) == ("; tune strategy: placement=none 0 trials, best optim.args.lr=0.001, "
                                       "3 seeds (its plan books 5)")


def test_the_planners_have_no_hydra_in_them():
    """The seeds and the tune planners import no Hydra (reading a Hydra plan imports it late, in
    posenc.cells.plan): only their adapters, posenc.harness.sweep.seeds and .tune, are Hydra's."""
    code = ("import sys, posenc.harness.sweep.planner, posenc.harness.sweep.tune_planner; "
            "print(sorted(m for m in sys.modules if m == 'hydra' or m.startswith('hydra.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]", out.stdout


def test_one_loop_drives_both_planners():
    """The loop that launches a planner's batches is LaunchingSweeper.drive; both adapters call it
    and neither loops itself."""
    from posenc.harness.sweep import launching, seeds, tune

    for module in (seeds, tune):
        tree = ast.parse(inspect.getsource(module))
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.While, ast.AsyncFor))], module.__name__
        drives = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr == "drive"]
        assert len(drives) == 1, module.__name__
    assert issubclass(seeds.SeedsSweeper, launching.LaunchingSweeper)
    assert issubclass(tune.TuneSweeper, launching.LaunchingSweeper)
    assert "drive" not in vars(seeds.SeedsSweeper) and "drive" not in vars(tune.TuneSweeper)
