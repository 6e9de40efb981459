"""Sweeps on a real SLURM (the local one of ``scripts/slurm_local.sh up``): the smoke Table 4 (its four
placements, seed 1) through the ``slurm`` launcher and a slice of it through ``submitit_slurm``; a cell
that outlives its time limit, requeued until it finishes by itself; a requeue by the scheduler
(``scontrol requeue``); ``scancel``; and a submitter killed with SIGKILL, whose rerun trains no cell
twice. Skipped, with one line, where no SLURM answers (``.ci/run`` brings the local cluster up and
fails if these were skipped)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from posenc.cells.plan import planned_cells
from posenc.cells.strategy import read_state
from posenc.harness.fairseq_logs import last_saved_update
from posenc.harness.run.slurm_job import CANCELLED, PREEMPTED
from project import child_env
from test_harness_survival import processes_mentioning

BIN = Path(sys.executable).parent
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
# One core and little memory per cell: the local node has this machine's cores; no GPUs. The local
# node confines nothing, so a cell's torch would take every core of the machine (the time-limit tests
# train for 1.6 minutes of wall time, however many threads): runtime.threads=1 keeps it to its one,
# leaving the other to the suite's other pytest worker.
ON_THE_NODE = ["hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2", "hydra.launcher.gpus_per_node=0",
               "runtime.threads=1"]

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def slurm_answers() -> str:
    """"" when a SLURM controller answers and has a node that can run jobs, else why not."""
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"no SLURM here ({type(err).__name__}: sinfo)"
    if proc.returncode != 0:
        said = proc.stderr.strip().splitlines()
        return f"no SLURM controller answers ({said[-1] if said else 'sinfo failed'})"
    if not any(state.strip().rstrip("*") in ("idle", "mix", "alloc", "comp") for state in proc.stdout.split()):
        return f"no SLURM node can run jobs (sinfo: {' '.join(proc.stdout.split())})"
    return ""


@pytest.fixture(scope="module", autouse=True)
def cluster():
    why = slurm_answers()
    if why:
        pytest.skip(f"{why}: bring the local one up with scripts/slurm_local.sh up")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("slurm")


PREPARE = """
import sys
from pathlib import Path
from hydra import compose, initialize_config_dir
from posenc.cells.keys import register_resolver
from posenc.corpora import prepare_corpus
register_resolver()
with initialize_config_dir(config_dir=sys.argv[1], version_base="1.3"):
    cfg = compose(config_name="config", overrides=sys.argv[3:])
prepare_corpus(cfg.data, Path(sys.argv[2]))
"""


@pytest.fixture(scope="module")
def corpus(root):
    """The tests' corpus, built before any job runs: its first preparation (a minute on a busy 2-core
    machine) must not eat a 1-minute time limit."""
    repo = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", PREPARE, str(repo / "conf"), str(root / "cache"), *SMALL_DATA],
                   check=True, capture_output=True, timeout=600, env=env_for(root))


def env_for(root):
    return child_env(root / "cache", PATH=f"{BIN}:{os.environ['PATH']}", HOME=str(root))  # sbatch and the rest on PATH


def command(sweep_dir, *args, launcher="slurm"):
    return [str(BIN / "posenc-run"), "-m", *args, *SMALL_DATA, f"hydra/launcher={launcher}", *ON_THE_NODE,
            f"hydra.launcher.name=posenc-test-{sweep_dir.name}", f"hydra.sweep.dir={sweep_dir}"]


def start(root, sweep_dir, *args, launcher="slurm"):
    out = open(root / f"{sweep_dir.name}.log", "w")
    return subprocess.Popen(command(sweep_dir, *args, launcher=launcher), cwd=root, env=env_for(root), stdout=out,
                            stderr=subprocess.STDOUT, text=True)


def run(root, sweep_dir, *args, launcher="slurm", timeout=900):
    proc = start(root, sweep_dir, *args, launcher=launcher)
    proc.wait(timeout=timeout)
    return proc.returncode, (root / f"{sweep_dir.name}.log").read_text()


def records(sweep_dir) -> dict:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/result.json")}


def jobs_named(name: str) -> dict:
    """``{job id: (state, reason)}`` of this test's jobs in the queue."""
    out = subprocess.run(["squeue", "--noheader", "--array", f"--name={name}", "--format=%i|%T|%r"],
                         capture_output=True, text=True, timeout=60).stdout
    return {jid: (state, reason) for jid, state, reason in (line.split("|") for line in out.split())}


def wait_for(condition, timeout=600, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


REQUEUE_SETTLE_S = 6


def job_logs(sweep_dir, tail=3000) -> str:
    """The end of every SLURM job's own log in a sweep (submitit's and the cell's output), for a failure message."""
    logs = sorted(sweep_dir.glob(".submitit/*/*_log.*"))
    return "\n".join(f"--- {log.name}\n{log.read_text()[-tail:]}" for log in logs)


@pytest.fixture
def without_requeue_delay():
    """SLURM holds a requeued job for 121 s before it may start again (its BeginTime; built in, not
    configurable). The tests make such jobs eligible after a few seconds (the node has let the last run's
    step go by then, even under load); nothing else about them changes."""
    done = threading.Event()
    held_since = {}

    def release():
        while not done.wait(2):
            out = subprocess.run(["squeue", "--noheader", "--array", "--states=PENDING", "--format=%i|%r"],
                                 capture_output=True, text=True, timeout=60).stdout
            for jid in (line.split("|")[0] for line in out.split() if line.endswith("|BeginTime")):
                if time.monotonic() - held_since.setdefault(jid, time.monotonic()) >= REQUEUE_SETTLE_S:
                    subprocess.run(["scontrol", "update", f"JobId={jid}", "StartTime=now"], capture_output=True,
                                   timeout=60)
                    held_since.pop(jid)
    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    yield
    done.set()
    thread.join(10)


def trainers(sweep_dir) -> dict:
    """``{cell directory name: number of training processes}`` running now."""
    counts = {}
    for cmd in processes_mentioning(str(sweep_dir)).values():
        if "posenc.trainer.train" in cmd:
            cell = cmd.split(f"{sweep_dir}/", 1)[1].split("/", 1)[0]
            counts[cell] = counts.get(cell, 0) + 1
    return counts


# --- the basic path ---------------------------------------------------------------------------------

@pytest.mark.parametrize("launcher,cells", [("slurm", ["experiment=table4", "seed=1"]),
                                            ("submitit_slurm", ["experiment=table4", "placement=both,none",
                                                                "seed=1"])])
def test_the_smoke_table4_through_a_slurm_launcher(root, launcher, cells):
    sweep = root / f"table4-{launcher}"
    started = time.monotonic()
    status, output = run(root, sweep, *cells, "budget=smoke", launcher=launcher)
    wall = time.monotonic() - started
    assert status == 0, output[-4000:]
    planned = [c.dirname for c in planned_cells(sweep)]
    got = records(sweep)
    assert sorted(got) == sorted(planned) and {r["status"] for r in got.values()} == {"ok"}
    assert (sweep / "table.md").exists() and (sweep / "results.csv").exists()
    assert f"{len(planned)} cells: {len(planned)} ok" in output
    print(f"{launcher}: {len(planned)} smoke cells in {wall:.0f} s")


def test_a_seeds_strategy_batch_goes_through_the_slurm_preset(root):
    """hydra/sweeper=posenc_seeds decides, the slurm preset runs: the pilot batch is one array job."""
    sweep = root / "seeds"
    status, output = run(root, sweep, "budget=smoke", "placement=both,none", "hydra/sweeper=posenc_seeds",
                         "hydra.sweeper.pilot_seeds=2", "hydra.sweeper.max_seeds=2")
    assert status == 0, output[-4000:]
    got = records(sweep)
    assert sorted((r["placement"], r["seed"]) for r in got.values()) == [("both", 1), ("both", 2), ("none", 1),
                                                                          ("none", 2)]
    assert {r["status"] for r in got.values()} == {"ok"}
    assert "seeds strategy: batch of 4" in output and "SLURM jobs " in output
    # The one look (n = 2 = max_seeds) was taken from the cells SLURM ran, and decided the row.
    (row,) = [r for r in read_state(sweep).rows if not r.baseline]
    assert [look.n for look in row.looks] == [2] and row.stopped in ("efficacy", "max_seeds"), row
    assert f"4 cells: 4 ok; seeds strategy: placement=none 2 seeds ({row.why}: {row.verdict}, Δ " in output


def test_a_tune_strategy_prunes_inside_slurm_jobs_through_the_shared_journal(root):
    """hydra/sweeper=posenc_tune asks, the slurm preset runs each batch as an array job, and a trial
    in its SLURM job reports to its row's study in the sweep directory's journal and is pruned there
    (the trial and its pruning as tests/test_tune_sweeper.py sets them up)."""
    sweep = root / "tune"
    status, output = run(root, sweep, "budget=smoke", "budget.max_epoch=2", "budget.max_update=0",
                         "placement=both,none", "hydra/sweeper=posenc_tune",
                         "hydra.sweeper.search_space={optim.args.lr: {choices: [0.003, 1e-05]}}",
                         "hydra.sweeper.trials=2", "hydra.sweeper.sampler_seed=2", "hydra.sweeper.pruner=median",
                         "hydra.sweeper.pruner_startup_trials=1", "hydra.sweeper.seeds=1")
    assert status == 0, output[-4000:]
    trials = {name: r for name, r in records(sweep).items() if r.get("trial") is not None}
    assert sorted((r["placement"], r["trial"], r["status"]) for r in trials.values()) == [
        ("both", 0, "ok"), ("both", 1, "pruned"), ("none", 0, "ok"), ("none", 1, "pruned")]
    assert all(r["error"].startswith("pruned by the median pruner") for r in trials.values() if r["trial"] == 1)
    assert "tune strategy: batch of 2 trials" in output and "SLURM jobs " in output
    assert "2 cells: 2 ok; tune strategy: placement=both 2 trials (1 pruned), best optim.args.lr=0.003" in output


# --- a time limit, a requeue by the scheduler -----------------------------------------------------------

# The cell's planned training: 1.6 minutes of training time (budget.max_time_min, summed over every job
# of the cell, fairseq's --stop-time-hours), and epochs enough never to end it first. A job under the
# 2-minute limit is warned at most 90 s after it starts, and fairseq's start-up takes 10 s or more, so
# no job trains 96 s: at least one requeue happens on a machine of any speed. (A fixed 60 epochs took
# 3 minutes here under load and under a minute on a quiet CI machine, which then never saw the warning.)
TRAIN_MIN = 1.6


@pytest.mark.timeout(1800)
def test_a_cell_longer_than_its_time_limit_finishes_by_itself(root, corpus, without_requeue_delay):
    """Training longer than a job under its 2-minute limit can hold: SLURM warns (USR2) 30 s before the
    limit (on the local cluster up to 30 s earlier still), the cell saves and is requeued, and ends with
    its planned training time trained, over several jobs. (A 1-minute limit left no time to train on a
    2-core machine under a load of 13: fairseq's start-up took 40 s, and the no-progress rule failed
    the cell, as it should.)"""
    sweep = root / "time-limit"
    status, output = run(root, sweep, "budget=smoke", "budget.max_epoch=100000", "budget.max_update=0",
                         f"budget.max_time_min={TRAIN_MIN}", "placement=both", "seed=1",
                         "hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=30", timeout=1500)
    assert status == 0, output[-2000:] + job_logs(sweep)
    (record,) = records(sweep).values()
    assert record["status"] == "ok" and record["error"] == ""
    assert record["resumed_from_update"] > 0 and record["stopped_by"] == "time_cap"
    assert record["train_wall_s"] >= TRAIN_MIN * 60  # the jobs' training runs, summed
    log = next(sweep.glob("*/train.log")).read_text()
    assert log.count("posenc: training stopped on request") >= 1  # saved at once on the warning


def test_scontrol_requeue_resumes_the_cell_from_its_checkpoint(root, corpus, without_requeue_delay):
    sweep = root / "requeue"
    # Forty epochs of three updates: the requeue lands once the first is done and the resumed job has
    # training left. (With three, a quiet machine trained them all within the second the requeue took to
    # land, and the requeued job found nothing to resume: the cell was scored as finished.)
    proc = start(root, sweep, "budget=smoke", "budget.max_epoch=40", "budget.max_update=0", "placement=none",
                 "seed=1")
    cell_log = lambda: next(sweep.glob("*/train.log"), None)  # noqa: E731
    wait_for(lambda: cell_log() and '"train_inner"' in cell_log().read_text() or
             cell_log() and '"epoch": 1' in cell_log().read_text(), what="training under way")
    (jid,) = jobs_named(f"posenc-test-{sweep.name}")
    subprocess.run(["scontrol", "requeue", jid], check=True, timeout=60)
    interrupted = wait_for(lambda: next((r for r in records(sweep).values() if r["status"] == "interrupted"), None),
                           timeout=120, what="the interrupted record")
    assert interrupted["error"].startswith(f"{PREEMPTED} during fairseq-train; its checkpoint at update ")
    assert proc.wait(timeout=900) == 0, (root / "requeue.log").read_text()[-4000:]
    (record,) = records(sweep).values()
    assert record["status"] == "ok" and record["resumed_from_update"] > 0 and record["stopped_by"] == "max_epoch"


# --- cancellation, a lost submitter -------------------------------------------------------------------

def checkpointed(log: Path) -> bool:
    """fairseq has saved a checkpoint (its "| valid |" line comes before the save: a cancel between
    the two finds no checkpoint yet, which CI once hit)."""
    return last_saved_update(log.read_text().splitlines()) is not None


def test_scancel_gives_interrupted_records_and_the_submitter_stops_within_a_minute(root):
    sweep = root / "cancel"
    proc = start(root, sweep, "budget=smoke", "budget.max_epoch=500", "budget.max_update=0",
                 "placement=both,none,source", "seed=1")
    name = f"posenc-test-{sweep.name}"
    def under_way():  # a cell past its first checkpoint, and a cell still waiting for the node
        trained = [log for log in sweep.glob("*/train.log") if checkpointed(log)]
        return trained and any(state == "PENDING" for state, _ in jobs_named(name).values())
    wait_for(under_way, what="a cell training, another pending")
    (array,) = {jid.split("_")[0] for jid in jobs_named(name)}
    cancelled = time.monotonic()
    subprocess.run(["scancel", array], check=True, timeout=60)
    status = proc.wait(timeout=120)
    took = time.monotonic() - cancelled
    output = (root / "cancel.log").read_text()
    assert status != 0 and took < 60, (took, output[-3000:])
    got = records(sweep)
    assert len(got) == 3 and {r["status"] for r in got.values()} == {"interrupted"}, got
    reasons = sorted(r["error"] for r in got.values())
    assert any(e.startswith(f"{CANCELLED} during fairseq-train; its checkpoint at update ") for e in reasons), reasons
    pending = [e for e in reasons if e.startswith("SLURM job ")]
    assert pending and all(e.endswith(" cancelled before the cell finished") for e in pending), reasons
    assert all(e.startswith((f"{CANCELLED} during fairseq-train", "SLURM job ")) for e in reasons), reasons
    assert "3 cells: 0 ok, 3 interrupted" in output and (sweep / "table.md").exists()
    print(f"scancel: the submitter exited {took:.0f} s later")


def test_a_killed_submitter_rerun_trains_no_cell_twice(root):
    sweep = root / "lost"
    # 40 epochs, about 20 s: a smoke epoch takes 0.5 s, and with 2 both jobs once ended before the rerun,
    # 5-10 s to start, asked the queue
    args = ("budget=smoke", "budget.max_epoch=40", "budget.max_update=0", "placement=both,none", "seed=1")
    first = start(root, sweep, *args)
    wait_for(lambda: len(trainers(sweep)) == 2, what="both cells training")
    first.send_signal(signal.SIGKILL)  # the SSH session died
    first.wait(timeout=60)
    assert len(jobs_named(f"posenc-test-{sweep.name}")) == 2  # the jobs go on
    rerun = start(root, sweep, *args)
    most = {}
    while rerun.poll() is None:
        for cell, n in trainers(sweep).items():
            most[cell] = max(most.get(cell, 0), n)
        time.sleep(0.5)
    output = (root / "lost.log").read_text()
    assert rerun.returncode == 0, output[-4000:]
    assert most and max(most.values()) == 1, most
    assert output.count("of an earlier posenc-run: waiting for it") == 2, output[-6000:]
    got = records(sweep)
    assert len(got) == 2 and {r["status"] for r in got.values()} == {"ok"}



def test_two_cells_per_array_task_run_side_by_side_as_its_slurm_tasks(root):
    """hydra.launcher.cells_per_task=2: the 4 smoke cells are 2 array tasks of 2 SLURM tasks each."""
    sweep = root / "per-task"
    status, output = run(root, sweep, "experiment=table4", "seed=1", "budget=smoke", "hydra.launcher.cells_per_task=2")
    assert status == 0, output[-4000:] + job_logs(sweep)
    got = records(sweep)
    assert len(got) == 4 and {r["status"] for r in got.values()} == {"ok"}, got
    tasks = sorted(log.name for log in sweep.glob(".submitit/*/*_log.out"))
    arrays = {name.rsplit("_", 3)[0] for name in tasks}
    assert len(arrays) == 1 and len(tasks) == 4, tasks  # one array job ...
    (array,) = arrays
    assert tasks == [f"{array}_{i}_{t}_log.out" for i in (0, 1) for t in (0, 1)]  # ... of 2 tasks, 2 cells each
    placements = {re.search(r"placement=(\w+)", log.read_text()).group(1)
                  for log in sweep.glob(".submitit/*/*_log.err")}
    assert placements == {"both", "none", "source", "target"}  # each task ran its own cell
    assert "4 cells: 4 ok" in output


def test_scancel_of_an_array_task_records_each_of_its_cells_interrupted(root):
    sweep = root / "cancel-per-task"
    proc = start(root, sweep, "budget=smoke", "budget.max_epoch=500", "budget.max_update=0", "placement=both,none",
                 "seed=1", "hydra.launcher.cells_per_task=2")
    name = f"posenc-test-{sweep.name}"

    def both_under_way():  # both cells of the one array task past their first checkpoint
        trained = [log for log in sweep.glob("*/train.log") if checkpointed(log)]
        return len(trained) == 2
    wait_for(both_under_way, what="both cells of the array task training")
    (array,) = {jid.split("_")[0] for jid in jobs_named(name)}
    subprocess.run(["scancel", array], check=True, timeout=60)
    status = proc.wait(timeout=120)
    output = (root / f"{sweep.name}.log").read_text()
    got = records(sweep)
    assert status != 0 and len(got) == 2 and {r["status"] for r in got.values()} == {"interrupted"}, got
    reasons = sorted(r["error"] for r in got.values())
    assert all(e.startswith(f"{CANCELLED} during fairseq-train; its checkpoint at update ") for e in reasons), reasons
    assert "2 cells: 0 ok, 2 interrupted" in output


def test_two_cells_of_an_array_task_past_its_time_limit_are_requeued_together(root, corpus, without_requeue_delay):
    """cells_per_task=2 and the time limit: each cell saves on the warning, the last to save requeues
    the array task once for both, and both resume and finish with their training time trained."""
    sweep = root / "time-limit-per-task"
    status, output = run(root, sweep, "budget=smoke", "budget.max_epoch=100000", "budget.max_update=0",
                         f"budget.max_time_min={TRAIN_MIN}", "placement=both,none", "seed=1",
                         "hydra.launcher.cells_per_task=2", "hydra.launcher.timeout_min=2",
                         "hydra.launcher.signal_delay_s=30", timeout=1500)
    assert status == 0, output[-2000:] + job_logs(sweep)
    got = records(sweep)
    assert len(got) == 2 and {r["status"] for r in got.values()} == {"ok"}, got
    assert all(r["resumed_from_update"] > 0 and r["train_wall_s"] >= TRAIN_MIN * 60 for r in got.values()), got
    assert all("posenc: training stopped on request" in log.read_text() for log in sweep.glob("*/train.log"))
    (first,) = sweep.glob(".submitit/*/requeue-*-0")  # the first job: both cells warned mid-training
    assert (first / "requeuing").exists() and len(list(first.glob("saved.*"))) == 2  # requeued once both saved
