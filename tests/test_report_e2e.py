"""Sweep forms end to end with Hydra itself: a preset with command-line sweeps over its own keys
and over a key that needs '+' (4 smoke cells), resumed, tabulated with significance, buckets,
the long split and figures; and a bare command-line sweep's plan against the directory Hydra
makes for it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.cells.plan import planned_cells
from project import child_env, summary_line

BIN = Path(sys.executable).parent
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
SWEEP = ["-m", "experiment=table4", "placement=both,none", "seed=1", "+model.args.dropout=0.1,0.2", "budget=smoke",
         *SMALL_DATA]

pytestmark = pytest.mark.slow


def run(*args, cwd, cache, tool="posenc-run"):
    env = child_env(cache)
    return subprocess.run([str(BIN / tool), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweeps")
    sweep = root / "sweep"
    proc = run(*SWEEP, f"hydra.sweep.dir={sweep}", cwd=root, cache=root / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, sweep, proc


def test_the_plan_names_the_directories_hydra_made(swept):
    _, sweep, _ = swept
    made = sorted(p.parent.name for p in sweep.glob("*/result.json"))
    assert len(made) == 4 and sorted(c.dirname for c in planned_cells(sweep)) == made
    assert all(json.loads((sweep / m / "result.json").read_text())["status"] == "ok" for m in made)


def test_the_sweep_end_table_has_significance_buckets_long_split_and_figures(swept):
    _, sweep, proc = swept
    table = (sweep / "table.md").read_text()
    # The answer last: the summary line, the compact table (within 100 columns), the path of table.md.
    lines = proc.stdout.rstrip("\n").splitlines()
    assert lines[-1] == f"Every table and note: {sweep / 'table.md'}" and table not in proc.stdout
    answer = lines[lines.index(summary_line(proc.stdout)) + 1:-1]
    assert all(len(line) <= 100 for line in answer) and answer[3].startswith("| row "), answer
    assert answer[2].startswith("paper Δ: Gehring et al. (2017)"), answer  # fconv, learned: Table 4 applies
    # Each row by the keys that vary (by their last parts where the whole keys would not fit).
    labels = {re.match(r"\| (model\.args\.)?dropout=(0\.[12]) placement=(\w+) ", line) for line in answer} - {None}
    assert sorted(m.group(2, 3) for m in labels) == [("0.1", "both"), ("0.1", "none"), ("0.2", "both"),
                                                     ("0.2", "none")], answer
    assert "| model.args.dropout |" in table  # the '+' key is a row key: its two values are never averaged
    # one baseline per dropout, in the verdict columns of BLEU and chrF++ on the test split and of the long split
    assert table.count("| baseline |") == 6
    for column in ("Δ BLEU", "| verdict (primary) |", "| p sentences only |", "95% CI", "BLEU 1-8", "BLEU 13+",
                   "BLEU long split", "p long"):
        assert column in table
    # every row tested by sacreBLEU; the verdict over seeds needs two seeds (this sweep has one)
    one_seed = "n/a: one paired seed (no spread over seeds to test against)"
    assert one_seed in table and "n/a" not in table.replace(one_seed, "") and "MISSING" not in table
    assert "Performing paired bootstrap" not in proc.stdout + proc.stderr  # sacreBLEU's INFO lines hushed
    for name in ("delta.png", "bleu.png", "bleu_by_length.png"):
        assert (sweep / name).read_bytes()[:4] == b"\x89PNG"


def test_a_rerun_resumes_and_prints_the_table_again(swept):
    root, sweep, _ = swept
    proc = run(*SWEEP, f"hydra.sweep.dir={sweep}", cwd=root, cache=root / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("finished earlier") == 4 and "| Δ [CI] " in proc.stdout
    assert proc.stdout.rstrip("\n").splitlines()[-1] == f"Every table and note: {sweep / 'table.md'}"


def test_posenc_table_against_another_baseline(swept):
    root, sweep, _ = swept
    proc = run(sweep, "--baseline", "model.args.dropout=0.1", "--format", "latex", cwd=root, cache=root / "cache",
               tool="posenc-table")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(r"\begin{tabular}") == 2 and "model.args.dropout=0.1" in proc.stdout


def test_a_bare_command_line_sweep_plans_before_its_first_cell(tmp_path):
    # model.family=bogus is refused inside each cell (recorded as failed; the sweep goes on), after
    # Hydra has written the plan and made the cells' directories: enough to compare the plan with
    # Hydra, without training.
    sweep = tmp_path / "cli"
    proc = run("-m", "budget=smoke", "placement=both,none", "model.family=bogus", f"hydra.sweep.dir={sweep}",
               cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "model.family='bogus'" in proc.stderr
    made = [p.name for p in sweep.iterdir() if p.is_dir()]
    cells = planned_cells(sweep)
    assert [c.dirname for c in cells] == ["budget=smoke,model.family=bogus,placement=both",
                                          "budget=smoke,model.family=bogus,placement=none"]
    assert sorted(made) == sorted(c.dirname for c in cells)
