"""The plan of every sweep form, recomputed from a multirun.yaml as Hydra's BasicSweeper expands it:
a command-line sweep, a preset, a preset with more swept keys, keys that need '+', a grid with skips.
(test_report_e2e.py checks the names against the directories a real Hydra sweep creates.)"""

import pytest

from posenc.cells.plan import override_values, planned_cells
from report_fixtures import write_plan

TABLE4 = {"placement": "both,source,target,none", "seed": "1,2,3"}


def names(sweep):
    return [c.dirname for c in planned_cells(sweep)]


def test_no_plan_without_multirun_yaml(tmp_path):
    assert planned_cells(tmp_path) is None


def test_command_line_sweep(tmp_path):
    write_plan(tmp_path, None, ["budget=smoke", "placement=both,none"])
    assert names(tmp_path) == ["budget=smoke,placement=both", "budget=smoke,placement=none"]


def test_preset(tmp_path):
    write_plan(tmp_path, TABLE4, ["experiment=table4"])
    assert names(tmp_path) == [f"placement={p},seed={s}"
                               for p in ("both", "source", "target", "none") for s in (1, 2, 3)]


def test_preset_with_more_seeds_on_the_command_line(tmp_path):
    write_plan(tmp_path, TABLE4, ["experiment=table4", "seed=1,2,3,4"])
    cells = planned_cells(tmp_path)
    assert len(cells) == 16 and {c.values["seed"] for c in cells} == {1, 2, 3, 4}
    assert "placement=none,seed=4" in names(tmp_path)


def test_preset_with_another_swept_key(tmp_path):
    write_plan(tmp_path, TABLE4, ["experiment=table4", "budget=smoke", "pe=learned,sinusoidal"])
    cells = planned_cells(tmp_path)
    assert len(cells) == 24 and "budget=smoke,pe=sinusoidal,placement=target,seed=2" in names(tmp_path)


def test_keys_that_need_a_plus(tmp_path):
    write_plan(tmp_path, TABLE4, ["experiment=table4", "+model.args.dropout=0.1,0.2"])
    cells = planned_cells(tmp_path)
    assert len(cells) == 24
    assert "+model.args.dropout=0.2,placement=source,seed=3" in names(tmp_path)
    assert {c.values["model.args.dropout"] for c in cells} == {0.1, 0.2}


def test_grid_skips_what_a_model_cannot_do(tmp_path):
    write_plan(tmp_path, {"model": "fconv_small,transformer_small", "pe": "learned,rope",
                          "placement": "both,none", "seed": "1"}, ["experiment=pe_grid"], skip_impossible=True)
    skipped = {c.dirname: c.skip_reason for c in planned_cells(tmp_path) if c.skip_reason}
    assert skipped == {
        "model=fconv_small,pe=rope,placement=both,seed=1": "fconv cannot do pe=rope",
        "model=fconv_small,pe=rope,placement=none,seed=1": "fconv cannot do pe=rope",
        "model=transformer_small,pe=rope,placement=none,seed=1":
            "placement=none has no kind; it runs once, as pe=learned",
    }


@pytest.mark.parametrize("lines, expected", [
    (["+model.args.dropout=0.1", "seed=2"], {"model.args.dropout": 0.1, "seed": 2}),
    (["placement=none", "budget=smoke"], {"placement": "none", "budget": "smoke"}),
])
def test_override_values(lines, expected):
    assert override_values(lines) == expected


def test_the_report_imports_neither_the_harness_nor_torch():
    import subprocess
    import sys
    code = ("import sys, pkgutil, importlib, posenc.report as r\n"
            "for m in pkgutil.iter_modules(r.__path__): importlib.import_module('posenc.report.' + m.name)\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('posenc.harness', 'torch', 'fairseq')))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
