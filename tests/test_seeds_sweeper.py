"""``hydra/sweeper=posenc_seeds``: a sweep that sizes each row's seeds by the verdict's plan, with
real cells on the joblib launcher (smoke budget), killed and rerun, and its refusals."""

import json
import os
import signal
import subprocess
import time

import pytest

from posenc.cells.plan import STRATEGY_FILE, planned_cells
from posenc.cells.sweep import read_sweep
from project import BIN, REPO

STRATEGY = ["hydra/sweeper=posenc_seeds", "hydra.sweeper.pilot_seeds=3", "hydra.sweeper.max_seeds=4",
            "hydra.sweeper.batch_seeds=1"]
TINY_EFFECT = ["hydra.sweeper.effect=0.01", "hydra.sweeper.test_size=100000000"]
SMOKE = ["budget=smoke", "placement=both,none", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]


def command(sweep, *args):
    return [str(BIN / "posenc-run"), "-m", *args, f"hydra.sweep.dir={sweep}"]


def environment(cache):
    env = {"POSENC_CACHE": str(cache), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def run(sweep, cache, *args, timeout=900):
    return subprocess.run(command(sweep, *args), cwd=REPO, env=environment(cache), capture_output=True, text=True,
                          timeout=timeout)


def stopped_once(sweep, cache, args, when: str) -> None:
    """Start the sweep, and SIGTERM its whole process group (as SLURM or a Ctrl-C would) as soon as
    a file matching ``when`` appears under it; the sweep must exit non-zero."""
    proc = subprocess.Popen(command(sweep, *args), cwd=REPO, env=environment(cache), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    while not list(sweep.glob(when)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:]
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGTERM)
    output = proc.communicate(timeout=300)[0]
    assert proc.returncode != 0, output[-3000:]


def state(sweep):
    return json.loads((sweep / STRATEGY_FILE).read_text())


@pytest.mark.parametrize("args,message", [
    (["hydra.sweeper.effect=0"], "hydra.sweeper.effect=0 is not allowed; allowed: a BLEU difference > 0"),
    (["hydra.sweeper.max_seeds=2"], "hydra.sweeper.max_seeds=2 is less than pilot_seeds=3; "
                                    "allowed: max_seeds >= pilot_seeds"),
    (["seed=1,2"], "seed=1,2: the seeds strategy chooses the seeds itself; allowed: no seed on the command line"),
    (["hydra.sweeper.baseline='pe=rope'"], "hydra.sweeper.baseline=pe=rope: no row of the sweep is compared with a "
                                         "pe=rope row"),
    (["hydra.sweeper.test_size=0"], "hydra.sweeper.test_size=0 is not allowed"),
    (["hydra.sweeper.min_seeds=0"], "hydra.sweeper.min_seeds=0 is not allowed; allowed: a whole number >= 1"),
])
def test_bad_settings_are_one_line_and_nothing_runs(tmp_path, args, message):
    sweep = tmp_path / "sweep"
    out = run(sweep, tmp_path / "cache", *SMOKE, *STRATEGY, *args, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"posenc-run: error: {message}"), line
    assert not sweep.exists() or not any(p.is_dir() for p in sweep.iterdir())  # no cell started


@pytest.mark.slow
def test_rows_run_their_pilot_then_their_plan_and_a_rerun_trains_nothing(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    # A hundredth of a BLEU, planned for a test set so large that its shared sampling vanishes: smoke
    # cells' seeds differ by about 0.06 BLEU, so the plan books hundreds of seeds (even where 3 seeds
    # happen to agree: the booking takes their spread as at least their sentence noise, issue 30),
    # and the row goes on to max_seeds and says so.
    out = run(sweep, cache, *SMOKE, *STRATEGY, *TINY_EFFECT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = state(sweep)
    rows = {r["row"]: r for r in got["rows"]}
    assert rows["placement=none"]["seeds"] == [1, 2, 3, 4] and rows["placement=both"]["seeds"] == [1, 2, 3, 4]
    assert rows["placement=none"]["stopped"] == "max_seeds"
    assert rows["placement=none"]["why"].startswith("stopped at max_seeds=4; the plan books ")
    # Two batches: the pilot (3 seeds of each row), then one more seed of each.
    logged = out.stdout + out.stderr  # Hydra's own log lines go to stdout
    batches = [line for line in logged.splitlines() if "seeds strategy: batch of" in line]
    assert [b.split("batch of ")[1].split(":")[0] for b in batches] == ["6", "2"], batches
    # Every reader sees the strategy's plan: six cells, all ok, and the summary says why the row stopped.
    assert sorted(c.dirname for c in planned_cells(sweep)) == sorted(
        f"budget=smoke,placement={p},seed={s}" for p in ("both", "none") for s in (1, 2, 3, 4))
    assert {c.status for c in read_sweep(sweep).every_cell()} == {"ok"}
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith("8 cells: 8 ok; seeds strategy: placement=none 4 seeds (stopped at max_seeds=4")
    table = (sweep / "table.md").read_text()
    assert "Seeds strategy (hydra/sweeper=posenc_seeds)" in table and "|Δ| = 0.01 BLEU at 100000000" in table
    # The same command again: every row has stopped, nothing is launched, nothing retrained.
    written = {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")}
    again = run(sweep, cache, *SMOKE, *STRATEGY, *TINY_EFFECT)
    assert again.returncode == 0 and "seeds strategy: batch of" not in again.stdout + again.stderr, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")} == written


@pytest.mark.slow
def test_a_sweeper_stopped_mid_study_continues_where_it_stopped(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    args = (*SMOKE, *STRATEGY, *TINY_EFFECT, "budget.max_epoch=3")
    stopped_once(sweep, cache, args, "*seed=4/train.log")  # the second batch is training
    pilot = {p: p.stat().st_mtime_ns for p in sweep.glob("*seed=[123]/result.json")}
    assert len(pilot) == 6 and all(json.loads(p.read_text())["status"] == "ok" for p in pilot)
    assert {json.loads(p.read_text())["status"] for p in sweep.glob("*seed=4/result.json")} <= {"interrupted"}
    again = run(sweep, cache, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    # The pilot is not trained again; the interrupted seeds are run (resumed) once, as the same cells.
    assert {p: p.stat().st_mtime_ns for p in pilot} == pilot
    launched = [line for line in (again.stdout + again.stderr).splitlines() if "seeds strategy: batch of" in line]
    assert len(launched) == 1 and "placement=both seed=4; placement=none seed=4" in launched[0], launched
    assert {c.status for c in read_sweep(sweep).every_cell()} == {"ok"} and len(read_sweep(sweep).cells) == 8
