"""scripts/cost_table4.py refuses a design as a new sweep does (issue 60, item 4): ``Design.problem``
alone let through a level per row whose thresholds the simulation cannot resolve (``unresolved``:
α = 1e-6, or N = 100 looks at α/3), whose table would have been zeros or Monte Carlo guesses."""

import subprocess
import sys

import pytest

from project import REPO

SCRIPT = REPO / "scripts" / "cost_table4.py"


def refusal(*args) -> str:
    out = subprocess.run([sys.executable, str(SCRIPT), "--sweeps", "1", *args], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 1 and not out.stdout, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    (line,) = out.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("args,start", [
    (["--alpha", "1e-6"], "cost_table4: --alpha 1e-06 over 3 rows sharing a baseline (--max-seeds 10): the level "
                          "3.333e-07 leaves a look 0 of the thresholds' 2,000,000 simulated null paths to cross"),
    (["--max-seeds", "100"], "cost_table4: --alpha 0.05 over 3 rows sharing a baseline (--max-seeds 100): the level "
                             "0.01667 leaves a look 112 of"),
    (["--alpha", "0.05", "--components", "a=0,0.4,0.06;b=0,0.4,0.06;c=0,0.4,0.06;d=0,0.4,0.06;e=0,0.4,0.06;"
      "f=0,0.4,0.06;g=0,0.4,0.06"], "cost_table4: --alpha 0.05 over 7 rows sharing a baseline"),
    (["--alpha", "2"], "cost_table4: alpha=2.0 is not allowed; allowed: 0 < alpha < 1"),
])
def test_a_design_a_new_sweep_would_refuse_is_refused_in_one_line(args, start):
    line = refusal(*args)
    assert line.startswith(start), line
    if "over" in start:
        assert "the smallest level that resolves is" in line and "allowed: --alpha >= " in line


def test_the_design_problem_matches_the_sweepers_check():
    """Six rows at α = 0.05 resolve, seven do not (docs/statistics.md): the script says what the sweeper says."""
    sys.path.insert(0, str(SCRIPT.parent))
    from cost_table4 import design_problem

    from posenc.harness.sweep.planner import StrategyError, new_design_check
    from posenc.stats.sequential import Design

    for rows in (6, 7):
        try:
            new_design_check(Design(), rows)
            refused = False
        except StrategyError:
            refused = True
        assert bool(design_problem(Design(), rows)) == refused == (rows == 7)
