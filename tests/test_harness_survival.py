"""posenc-run under what clusters do to jobs: SIGKILL of the whole sweep, SIGTERM, a diverging cell,
two sweeps on the same directory at once, a truncated result.json, a time cap above the step limit.
Short smoke cells on a small generated corpus."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from posenc.cells.record import RUNNING_ERROR
from posenc.harness.config.environment import ALWAYS
from posenc.harness.fairseq_logs import hypotheses_by_id
from project import child_env, summary_line

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
# 300 sentences are 3 updates an epoch, each epoch ending in a checkpoint: 12 updates are 4 epochs.
LONGER = ["budget=smoke", "budget.max_epoch=0", "budget.max_update=12", *SMALL_DATA]
SECRET = "wandb-key-that-must-never-be-written-0123456789"

pytestmark = pytest.mark.slow


def user_env(cache, **extra):
    """A user's environment: PATH, the cache, a W&B key, the suite's OMP_NUM_THREADS (``child_env``; the
    user's own, which the harness passes on and never exports), and no variable the harness adds itself."""
    return child_env(cache, HOME=os.environ.get("HOME", "/root"), LANG="C.UTF-8", WANDB_API_KEY=SECRET, **extra)


def posenc_run(*args, cwd, cache, timeout=900):
    return subprocess.run([str(BIN / "posenc-run"), *args], cwd=cwd, env=user_env(cache), capture_output=True,
                          text=True, timeout=timeout)


def start(*args, cwd, cache, name):
    out = open(cwd / f"{name}.out", "w")
    err = open(cwd / f"{name}.err", "w")
    return subprocess.Popen([str(BIN / "posenc-run"), *args], cwd=cwd, env=user_env(cache), stdout=out, stderr=err,
                            start_new_session=True)


def wait_for(condition, timeout=600, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def processes_mentioning(text: str) -> dict:
    """``{pid: command line}`` of live processes whose command line contains ``text``."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if text in cmdline and "zombie" not in state:
            found[int(proc.name)] = cmdline
    return found


def environ_of(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def record(cell: Path) -> dict:
    return json.loads((cell / "result.json").read_text())


def no_secret_under(folder: Path):
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.endswith(".pt"):
            assert SECRET not in path.read_text(errors="replace"), path


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("survival")


@pytest.fixture(scope="module")
def killed_sweep(root):
    """A two-cell sweep (the same cell under two labels) killed with SIGKILL, whole process group,
    while its second cell trains and after that cell saved a checkpoint (the end of epoch 1: it
    resumes in epoch 2); then the same command again."""
    sweep = root / "killed"
    args = ["-m", *LONGER, "experiment_name=first,second", f"hydra.sweep.dir={sweep}"]
    proc = start(*args, cwd=root, cache=root / "cache", name="killed")
    first, second = (lambda: next(sweep.glob("*=first*"))), (lambda: next(sweep.glob("*=second*")))
    wait_for(lambda: (sweep / "multirun.yaml").exists()
             and any(sweep.glob("*=second*/checkpoints/checkpoint_last.pt")),
             what="the second cell's first checkpoint")
    assert record(first())["status"] == "ok" and record(second())["status"] == "running"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = record(second())  # a cell killed outright says so, never that it failed for no reason
    assert (killed["status"], killed["error"]) == ("running", RUNNING_ERROR)
    started = time.monotonic()
    while processes_mentioning(str(sweep)) and time.monotonic() - started < 10:
        time.sleep(0.2)
    leftovers = processes_mentioning(str(sweep))
    first_mtime = (first() / "result.json").stat().st_mtime_ns
    rerun = posenc_run(*args, cwd=root, cache=root / "cache")
    return sweep, first(), second(), first_mtime, leftovers, rerun, args


def test_sigkill_leaves_no_trainer_and_the_rerun_resumes(killed_sweep):
    sweep, first, second, first_mtime, leftovers, rerun, _ = killed_sweep
    assert leftovers == {}, f"outlived the kill: {leftovers}"
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (first / "result.json").stat().st_mtime_ns == first_mtime  # the finished cell is untouched
    done, resumed = record(first), record(second)
    assert (done["status"], resumed["status"]) == ("ok", "ok")
    assert done["resumed_from_update"] == 0 and resumed["resumed_from_update"] > 0
    # The same training as the uninterrupted first cell, bit for bit: the same update count, the
    # same parameters and the same hypotheses.
    assert resumed["num_updates"] == done["num_updates"] == 12 and resumed["resume_exact"] is True
    kept, retrained = (torch.load(c / "checkpoints" / "checkpoint_best.pt", weights_only=False)["model"]
                       for c in (first, second))
    assert kept.keys() == retrained.keys() and all(torch.equal(kept[k], retrained[k]) for k in kept)
    assert (second / "hypotheses.txt").read_bytes() == (first / "hypotheses.txt").read_bytes()
    assert "resuming from checkpoints/checkpoint_last.pt" in rerun.stderr
    assert summary_line(rerun.stdout) == "2 cells: 2 ok"


def test_a_truncated_result_is_shown_as_unreadable_and_redone(killed_sweep, root):
    sweep, first, second, _, _, _, args = killed_sweep
    data = (first / "result.json").read_bytes()
    (first / "result.json").write_bytes(data[: len(data) // 2])  # a disk that filled up mid-write
    table = subprocess.run([str(BIN / "posenc-table"), str(sweep)], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "Traceback" not in table.stderr
    assert f"UNREADABLE {first.name}/result.json: JSONDecodeError" in table.stdout
    kept = (second / "result.json").stat().st_mtime_ns
    rerun = posenc_run(*args, cwd=root, cache=root / "cache")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert record(first)["status"] == "ok" and (second / "result.json").stat().st_mtime_ns == kept
    # Its training had finished: the rerun only scores it again.
    assert "scoring it without retraining" in rerun.stderr and "training posenc" not in rerun.stderr


def test_sigterm_interrupts_and_the_rerun_resumes(root):
    cell = root / "term"
    proc = start(*LONGER, f"hydra.run.dir={cell}", cwd=root, cache=root / "cache", name="term")
    wait_for(lambda: (cell / "checkpoints" / "checkpoint_last.pt").exists(), what="a checkpoint")
    trainers = [pid for pid, cmd in processes_mentioning(str(cell)).items() if "posenc.trainer.train" in cmd]
    assert len(trainers) == 1
    # The environment fairseq got: the user's plus exactly the documented variables, as commands.sh exports.
    assert environ_of(trainers[0]) == {**user_env(root / "cache"), **ALWAYS}
    exported = dict(line[len("export "):].split("=", 1) for line in (cell / "commands.sh").read_text().splitlines()
                    if line.startswith("export "))
    assert exported == ALWAYS
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    assert not processes_mentioning(str(cell))
    interrupted = record(cell)
    assert interrupted["status"] == "interrupted"
    assert interrupted["error"].startswith("interrupted by SIGTERM during fairseq-train; its checkpoint at update ")
    assert (cell / "checkpoints" / "checkpoint_last.pt").exists()
    rerun = posenc_run(*LONGER, f"hydra.run.dir={cell}", cwd=root, cache=root / "cache")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    finished = record(cell)
    assert finished["status"] == "ok" and finished["resumed_from_update"] > 0 and finished["num_updates"] == 12
    assert finished["resume_exact"] is True
    no_secret_under(cell)


def children_of(pid: int) -> list:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*")
            if (p / "stat").exists() and _ppid(p) == pid]


def _ppid(proc: Path):
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_sigterm_to_posenc_run_alone_stops_the_cells_in_its_joblib_workers(root):
    """`kill PID` of a sweep run by the joblib launcher: the cells in the workers stop as the
    parent does (interrupted, checkpoint kept), the tables and summary are written, nothing is
    left training, and the rerun resumes."""
    sweep = root / "joblib-term"
    args = ["-m", *LONGER, "budget.max_update=60", "placement=both,none", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]
    proc = start(*args, cwd=root, cache=root / "cache", name="joblib-term")
    wait_for(lambda: len(list(sweep.glob("*/checkpoints/checkpoint_last.pt"))) == 2,
             what="both cells' first checkpoint")
    workers = children_of(proc.pid)
    proc.send_signal(signal.SIGTERM)  # to posenc-run alone, not its process group
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    wait_for(lambda: not processes_mentioning(str(sweep)), timeout=30, what="the trainers to stop")
    assert [r["status"] for r in map(record, sorted(sweep.glob("*placement=*")))] == ["interrupted", "interrupted"]
    said = (root / "joblib-term.out").read_text() + (root / "joblib-term.err").read_text()
    assert "2 cells: 0 ok, 2 interrupted" in said and (sweep / "table.md").exists()
    assert workers  # the joblib workers (and loky's resource tracker) go with their parent
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() and _ppid(Path(f"/proc/{pid}")) is not None
                             for pid in workers), timeout=30, what="the workers to exit")
    rerun = posenc_run(*args, cwd=root, cache=root / "cache")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert all(record(c)["resumed_from_update"] > 0 for c in sweep.glob("*placement=*"))


def test_a_diverging_cell_fails_alone_and_the_sweep_says_so(root):
    sweep = root / "lr"
    proc = posenc_run("-m", "budget=smoke", "budget.max_update=6", *SMALL_DATA, "optim.args.lr=0.002,1e9",
                      f"hydra.sweep.dir={sweep}", cwd=root, cache=root / "cache")
    assert proc.returncode == 1, proc.stderr[-3000:]
    absurd, sane = next(sweep.glob("*lr=1000000000.0*")), next(sweep.glob("*lr=0.002*"))
    failed = record(absurd)
    assert failed["status"] == "failed" and "\n" not in failed["error"]
    assert failed["error"].startswith("training diverged") or " is nan at update " in failed["error"] \
        or " is inf at update " in failed["error"], failed["error"]
    assert record(sane)["status"] == "ok"
    reason = failed["error"].split(" (log: ")[0]
    assert summary_line(proc.stdout) == \
        f"2 cells: 1 ok, 1 failed: optim.args.lr=1000000000.0 ({reason})"
    assert "FAILED" in (sweep / "table.md").read_text() and (sweep / "results.csv").read_text().count("\n") == 3


def test_two_sweeps_at_once_build_the_corpus_once_and_train_each_cell_once(root):
    cache, sweep = root / "fresh-cache", root / "together"
    args = ["-m", "budget=smoke", "budget.max_update=6", *SMALL_DATA, "placement=both,none", f"hydra.sweep.dir={sweep}"]
    procs = [start(*args, cwd=root, cache=cache, name=f"together{i}") for i in (1, 2)]
    codes = [p.wait(timeout=900) for p in procs]
    errs = [(root / f"together{i}.err").read_text() for i in (1, 2)]
    outs = [(root / f"together{i}.out").read_text() for i in (1, 2)]
    assert codes == [0, 0], errs
    both = "".join(errs)
    assert both.count("fairseq-preprocess") == 1 and len([p for p in (cache / "corpora").iterdir() if p.is_dir()]) == 1
    assert both.count("training posenc_fconv_small") == 2 and both.count("finished earlier") == 2
    assert all(summary_line(out) == "2 cells: 2 ok" for out in outs)
    assert all(record(cell.parent)["status"] == "ok" for cell in sweep.glob("*/result.json"))


def test_a_training_time_cap_above_the_step_limit_is_honoured(root):
    cell = root / "capped"
    caps = ["budget=smoke", *SMALL_DATA, "budget.max_epoch=0", "budget.max_update=0", "budget.max_time_min=0.3"]
    first = posenc_run(*caps, "budget.step_timeout_min=0.1", f"hydra.run.dir={cell}", cwd=root, cache=root / "cache")
    assert "training may take budget.max_time_min=0.3 min, more than budget.step_timeout_min=0.1 allows: " \
           "its hard limit is 5.3 min" in first.stderr
    state = json.loads((cell / "state.json").read_text())
    # Trained for its 18 s of training time, well past the 6 s step limit, and ended normally.
    assert state["finished"] and state["training"]["train_wall_s"] > 18 and \
        "done training" in (cell / "train.log").read_text()
    if first.returncode != 0:  # fairseq-generate may well exceed 6 s: the checkpoint stays, scored next time
        assert "fairseq-generate exceeded its time limit of 0.1 min" in record(cell)["error"]
    rerun = posenc_run(*caps, "budget.step_timeout_min=5", f"hydra.run.dir={cell}", cwd=root, cache=root / "cache")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    if first.returncode != 0:
        assert "scoring it without retraining" in rerun.stderr and "training posenc" not in rerun.stderr
    assert record(cell)["status"] == "ok" and record(cell)["train_wall_s"] > 18


def test_commands_sh_reruns_the_cell_by_hand(killed_sweep, root):
    """The cell's commands.sh, run by hand in a copy of the cell, is the same run: same translations."""
    _, first, _, _, _, _, _ = killed_sweep
    copy = root / "by hand"  # a path with a space: commands.sh quotes it
    copy.mkdir()
    lines = []  # the same script for the copy: every word re-quoted after the path is replaced
    for line in (first / "commands.sh").read_text().splitlines():
        if line.startswith(("cd ", "/")):
            line = shlex.join(w.replace(str(first), str(copy)) for w in shlex.split(line)).replace(" '>' ", " > ")
        lines.append(line)
    (copy / "commands.sh").write_text("\n".join(lines) + "\n")
    proc = subprocess.run(["bash", str(copy / "commands.sh")], cwd=root, env=user_env(root / "cache"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_hand = hypotheses_by_id((copy / "generate-test.log").read_text().splitlines())
    harness = (first / "hypotheses.tok.txt").read_text().splitlines()
    assert [by_hand[i] for i in range(len(harness))] == harness
