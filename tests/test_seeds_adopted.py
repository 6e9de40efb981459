"""Cells a seeds sweep finds in its directory (issue 60, item 4): with or without a seeds state, a
finished cell the state never launched would enter the next look as found; it is refused in one
line, or adopted and recorded (``hydra.sweeper.adopt=true``). The walk is ``cells.sweep``'s, the one
module that walks a sweep for its records (issue 61)."""

import json

import pytest

from posenc.cells.strategy import SEEDS_FILE, SeedsState, StateCell, read_state
from posenc.cells.sweep import read_sweep, reported_cells
from posenc.harness.sweep.planner import StrategyError
from posenc.harness.sweep.seeds import found_cells

SETTINGS = {"alpha": 0.05, "pilot_seeds": 3, "max_seeds": 4, "spending": "hsd", "gamma": -2.0, "futility": 0.1,
            "futility_from": 5, "statistic": "verdict", "effect": 0.5, "test_size": None, "baseline": "placement=both",
            "batch_seeds": 1}


def cell(sweep, name):
    (sweep / name).mkdir(parents=True)
    (sweep / name / "result.json").write_text("{}")


def with_state(sweep, launched):
    sweep.mkdir(parents=True, exist_ok=True)
    cells = [{"dirname": name, "overrides": name.split(",")} for name in launched]
    (sweep / SEEDS_FILE).write_text(json.dumps({"strategy": "seeds", "settings": SETTINGS, "rows": [],
                                                "cells": cells}))
    state = read_state(sweep)
    assert isinstance(state, SeedsState)
    return state


def test_the_one_walk_finds_nested_cells_as_read_sweep_does(tmp_path):
    sweep = tmp_path / "sweep"
    for name in ("placement=both,seed=1", "nested/placement=none,seed=1"):
        cell(sweep, name)
    assert reported_cells(sweep) == ["nested/placement=none,seed=1", "placement=both,seed=1"]
    read = read_sweep(sweep)
    assert sorted([c.name for c in read.cells] + [name for name, _ in read.unreadable]) == reported_cells(sweep)
    assert reported_cells(tmp_path / "none") == []


def test_a_cell_its_state_never_launched_is_refused_or_adopted(tmp_path):
    sweep = tmp_path / "sweep"
    state = with_state(sweep, ["placement=both,seed=1", "placement=none,seed=1"])
    for name in ("placement=both,seed=1", "placement=none,seed=1", "placement=none,seed=4"):
        cell(sweep, name)
    with pytest.raises(StrategyError) as refused:
        found_cells(sweep, False, state)
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"{sweep} holds 1 cells that its {SEEDS_FILE} never launched (e.g. placement=none,seed=4)")
    assert line.endswith("or hydra.sweeper.adopt=true to adopt them (the state and the table say so)")
    assert found_cells(sweep, True, state) == ["placement=none,seed=4"]
    # once the state records it (launched or adopted), it is the state's own cell
    adopted = SeedsState(state.settings, [], state.cells, adopted=["placement=none,seed=4"])
    assert found_cells(sweep, False, adopted) == []
    launched = SeedsState(state.settings, [], [*state.cells, StateCell("placement=none,seed=4", [])])
    assert found_cells(sweep, False, launched) == []


def test_without_a_state_every_cell_is_found(tmp_path):
    sweep = tmp_path / "sweep"
    cell(sweep, "placement=both,seed=1")
    with pytest.raises(StrategyError, match=r"holds 1 cells \(e\.g\. placement=both,seed=1\) but no "):
        found_cells(sweep, False)
    assert found_cells(sweep, True) == ["placement=both,seed=1"]
    assert found_cells(tmp_path / "new", False) == []
    with pytest.raises(StrategyError, match=r"^hydra\.sweeper\.adopt='maybe' is not allowed; allowed: true or false$"):
        found_cells(sweep, "maybe")
