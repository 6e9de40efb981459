"""scripts/replay_sequential.py: a sweep's recorded looks replayed under another γ take the
decisions the design's first-look closed form says they must."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.stats.sequential import Design, spending

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "replay_sequential.py"


def look(n, p, delta=-25.0):
    return {"n": n, "delta": delta, "se": 1.2, "df": 2.1, "p": p, "spread": 3.5, "shared": 0.3, "sentences": 500}


def write(sweep: Path, p: float) -> None:
    settings = {"effect": 4.0, "alpha": 0.05, "pilot_seeds": 3, "max_seeds": 10, "spending": "hsd", "gamma": -3.0,
                "futility": 0.1, "futility_from": 5, "batch_seeds": 1}
    rows = [{"row": "placement=both", "baseline": True},
            *({"row": f"placement={name}", "looks": [look(3, p)]} for name in ("source", "target", "none"))]
    sweep.mkdir()
    (sweep / "seeds_strategy.json").write_text(json.dumps({"strategy": "seeds", "settings": settings,
                                                           "rows": rows, "cells": []}))


def replay(sweep: Path, *args) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), str(sweep), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_pilot_p_between_the_two_gammas_first_thresholds_stops_only_under_the_larger_one(tmp_path):
    level = 0.05 / 3                                   # three rows, none rejected: Holm's α/3
    at3 = {g: float(spending("hsd", 0.3, level, g)) for g in (-3.0, -2.0)}   # the first look: the α spent
    assert at3[-3.0] < at3[-2.0]
    write(tmp_path / "sweep", (at3[-3.0] + at3[-2.0]) / 2)
    seeds = ("--statistic", "seeds")                   # the first look's closed form is the seeds-only t's
    assert replay(tmp_path / "sweep", "--gamma", "-3", *seeds).count("open after its last recorded look") == 3
    assert replay(tmp_path / "sweep", "--gamma", "-2", *seeds).count("->  efficacy at 3 seeds") == 3


def test_a_pilot_p_the_verdicts_thresholds_refuse_stops_only_under_the_seeds_only_table(tmp_path):
    """A state of before the statistic was recorded ran the seeds-only table; replayed for the
    verdict's t (the default), a pilot p between the two tables' a(3) at α/3 no longer stops."""
    level = 0.05 / 3
    verdict, seeds = (Design(gamma=-3.0, statistic=s).thresholds(level)[3] for s in ("verdict", "seeds"))
    assert verdict < seeds / 2
    write(tmp_path / "sweep", (verdict + seeds) / 2)
    out = replay(tmp_path / "sweep", "--gamma", "-3")
    assert "ran at γ = -3 for the seeds t, replayed at γ = -3 for the verdict t" in out
    assert out.count("open after its last recorded look") == 3


@pytest.mark.parametrize("args,message", [(["--gamma", "11"], "gamma=11.0 is not allowed"),
                                          ([], "holds no group sequential seeds state")])
def test_bad_input_is_one_line(tmp_path, args, message):
    sweep = tmp_path / "sweep"
    if args:
        write(sweep, 0.5)
    else:
        sweep.mkdir()
    done = subprocess.run([sys.executable, str(SCRIPT), str(sweep), *args], capture_output=True, text=True)
    assert done.returncode == 1 and message in done.stderr and done.stderr.count("\n") == 1
