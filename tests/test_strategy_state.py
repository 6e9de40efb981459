"""The strategies' states are typed from the file in to the file out: settings are ``SeedsSettings``
(``OldRuleSettings`` for the old rule, ``TuneSettings`` for tune), looks are
``sequential.Look``; JSON exists only in ``read_state``/``write_state``, and a state read and written
again is the same file."""

import json
import math

from posenc.cells.strategy import (
    SEEDS_FILE,
    TUNE_FILE,
    BestTrial,
    OldRuleSettings,
    SeedsSettings,
    TuneSettings,
    read_state,
    write_state,
)
from posenc.stats.sequential import OLDER, Design, Look

LOOK = {"n": 3, "delta": -1.5, "se": 0.4, "df": 2.0, "p": 0.03, "spread": 0.3, "shared": 0.01, "sentences": 500,
        "threshold": 0.004, "cond_power": 0.7, "level": 0.025}
DESIGN = {"alpha": 0.05, "pilot_seeds": 3, "max_seeds": 10, "spending": "hsd", "gamma": -2.0, "futility": 0.1,
          "futility_from": 5, "statistic": "verdict"}
SETTINGS = {**DESIGN, "effect": 1.0, "test_size": None, "baseline": "placement=both", "batch_seeds": 1}
ROW = {"row": "placement=none", "overrides": ["placement=none"], "baseline": False, "seeds": [1, 2, 3],
       "stopped": "efficacy", "why": "efficacy at 3 seeds", "verdict": "worse", "looks": [LOOK],
       "ci": [-2.9, -0.1], "stop_n": 3, "level": 0.025, "unreachable": "", "planned": None}
CELLS = [{"dirname": "placement=none,seed=1", "overrides": ["placement=none", "seed=1"]}]


def written(path, data) -> str:
    path.write_text(json.dumps(data, indent=2))
    return path.read_text()


def test_a_seeds_state_reads_typed_and_writes_back_the_same_file(tmp_path):
    before = written(tmp_path / SEEDS_FILE, {"strategy": "seeds", "settings": SETTINGS, "rows": [ROW],
                                             "cells": CELLS})
    state = read_state(tmp_path)
    assert state.settings == SeedsSettings(Design(**DESIGN), 1.0, None, "placement=both", 1)
    (row,) = state.rows
    assert row.looks == [Look(**LOOK)] and row.stop_look().delta == -1.5
    write_state(tmp_path, state)
    assert json.loads((tmp_path / SEEDS_FILE).read_text()) == json.loads(before)



def test_a_seeds_states_look_seeds_and_adopted_cells_read_and_write_back(tmp_path):
    """Issue 49: each look's seeds and the cells adopted at the first launch are kept; a state
    without them (written before) still writes back without them (the test above)."""
    row = {**ROW, "look_seeds": [[1, 2, 3]]}
    before = written(tmp_path / SEEDS_FILE, {"strategy": "seeds", "settings": SETTINGS, "rows": [row],
                                             "cells": CELLS, "adopted": ["placement=none,seed=1"]})
    state = read_state(tmp_path)
    assert state.adopted == ["placement=none,seed=1"] and state.rows[0].look_seeds == [[1, 2, 3]]
    write_state(tmp_path, state)
    assert json.loads((tmp_path / SEEDS_FILE).read_text()) == json.loads(before)


def test_a_state_from_before_a_design_setting_ran_what_older_says_and_knows_it():
    """A state written before ``statistic`` existed ran the seeds-only table; the settings say which
    settings they were filled for (the planner's refusal of a changed design names why)."""
    flat = {k: v for k, v in SETTINGS.items() if k != "statistic"}
    settings = SeedsSettings.of(flat)
    assert settings.design.statistic == OLDER["statistic"] and settings.predates == {"statistic"}
    assert SeedsSettings.of(SETTINGS).predates == frozenset() and settings.as_state() == flat  # read, written: the same


def test_an_old_rules_state_has_old_rule_settings(tmp_path):
    old = {"effect": 0.5, "test_size": None, "baseline": "placement=both", "pilot_seeds": 3, "max_seeds": 10,
           "batch_seeds": 2, "min_seeds": 7}
    written(tmp_path / SEEDS_FILE, {"strategy": "seeds", "settings": old, "rows": [], "cells": []})
    state = read_state(tmp_path)
    assert state.old_rule and state.settings == OldRuleSettings(**old) and state.settings.as_state() == old
    assert state.sequential_rows() == []


def test_a_tune_state_reads_typed_and_writes_back_the_same_file(tmp_path):
    settings = {"trials": 3, "batch_trials": 1, "startup_trials": 4, "prune_from_epoch": 1, "pruner_startup_trials": 2,
                "seeds": 3, "sampler_seed": 0, "trial_seed": 0, "pruner": "median", "baseline": "placement=both",
                "seeds_strategy": SETTINGS}
    data = {"strategy": "tune", "settings": settings, "search_space": {"optim.args.lr": {"low": 1e-4, "high": 1e-2}},
            "rows": [{"row": "placement=none", "overrides": ["placement=none"], "study": "placement=none",
                      "trials": [], "best": {"number": 2, "value": 3.1, "values": {"optim.args.lr": "0.002"}},
                      "seeds": [1, 2, 3], "plan": ROW}],
            "trials": [], "cells": CELLS}
    before = written(tmp_path / TUNE_FILE, data)
    state = read_state(tmp_path)
    assert isinstance(state.settings, TuneSettings) and state.settings.pruner == "median"
    assert state.rows[0].best == BestTrial(2, 3.1, {"optim.args.lr": "0.002"})
    assert state.rows[0].best_overrides == ["optim.args.lr=0.002"]
    assert isinstance(state.seeds_settings(), SeedsSettings) and state.seeds_settings().design == Design(**DESIGN)
    assert state.sequential_rows()[0].looks == [Look(**LOOK)]
    write_state(tmp_path, state)
    assert json.loads((tmp_path / TUNE_FILE).read_text()) == json.loads(before)


def test_a_look_not_yet_judged_reads_as_going_on():
    """A look the design has not judged (no threshold) is said as going on, never as 'a(n) nan'."""
    from posenc.cells.strategy import SeedsRow
    from posenc.report.sequential import row_stop

    row = SeedsRow("r", ["r"], looks=[Look(3, 0.1, 0.5, 2.0, 0.8)])
    assert math.isnan(row.looks[0].threshold) and row_stop(row) == "going on"
    judged = SeedsRow("r", ["r"], looks=[Look(3, 0.1, 0.5, 2.0, 0.8, threshold=0.004)])
    assert row_stop(judged) == "going on after the look at 3 seeds (p 0.8000 against a(3) 0.0040)"
