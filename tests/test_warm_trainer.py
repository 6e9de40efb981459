"""The warm trainer (posenc/trainer/warm.py, posenc/harness/run/warm.py): a sweep's cells are forked
by one process that imported torch and fairseq once, and each trains exactly as a fresh trainer
process (``runtime.warm_trainer=false``) would, checkpoint and hypotheses byte for byte."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from posenc.harness.run import child, warm
from posenc.trainer.warm import WARM_START_MARK
from project import child_env, posenc_run, summary_line

BIN = Path(sys.executable).parent
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
PLACEMENTS = ("both", "none")

pytestmark = pytest.mark.slow


def cells_of(sweep: Path, placements) -> dict:
    return {p: next(sweep.glob(f"*placement={p},*")) for p in placements}


def marks(cell: Path) -> list:
    return [line.split()[-1] for line in (cell / "train.log").read_text().splitlines()
            if line.startswith(WARM_START_MARK)]


def losses(cell: Path) -> list:
    """fairseq's train and valid lines, without the speeds and clocks that differ between runs."""
    out = []
    for line in (cell / "train.log").read_text().splitlines():
        if "| INFO | train |" in line or "| INFO | valid |" in line:
            out.append({k: v for k, v in json.loads(line.split(" | ", 3)[3]).items()
                        if not k.endswith(("wps", "ups", "wall", "gb_free"))})
    return out


@pytest.fixture(scope="module")
def warm_and_cold(tmp_path_factory):
    root = tmp_path_factory.mktemp("warm")
    runs = {}
    # Two warm cells (the second forked by the warm trainer the first started), the second cold.
    for name, placements, extra in (("warm", PLACEMENTS, []), ("cold", PLACEMENTS[1:], ["runtime.warm_trainer=false"])):
        sweep = root / name
        proc = posenc_run("-m", "experiment=table4", "budget=smoke", "seed=1", f"placement={','.join(placements)}",
                          *SMALL_DATA, *extra, f"hydra.sweep.dir={sweep}", cwd=root, cache=root / "cache")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert summary_line(proc.stdout) == f"{len(placements)} cells: {len(placements)} ok"
        runs[name] = cells_of(sweep, placements)
    return runs


def test_one_warm_trainer_forks_every_cell_of_the_sweep(warm_and_cold):
    pids = [marks(cell) for cell in warm_and_cold["warm"].values()]
    assert all(len(p) == 1 for p in pids) and pids[0] == pids[1], pids  # one warm trainer, two cells
    assert all(marks(cell) == [] for cell in warm_and_cold["cold"].values())


def test_a_warm_cell_trains_and_decodes_as_a_fresh_trainer_byte_for_byte(warm_and_cold):
    for placement in warm_and_cold["cold"]:  # the warm sweep's forked cell, the one after its first
        warm_cell, cold_cell = warm_and_cold["warm"][placement], warm_and_cold["cold"][placement]
        assert losses(warm_cell) == losses(cold_cell) and losses(warm_cell)
        kept, fresh = (torch.load(c / "checkpoints" / "checkpoint_best.pt", weights_only=False)["model"]
                       for c in (warm_cell, cold_cell))
        assert kept.keys() == fresh.keys()
        differ = [k for k in kept if not torch.equal(kept[k], fresh[k])]
        assert not differ, (f"{len(differ)} of {len(kept)} tensors differ, by at most "
                            f"{max((kept[k] - fresh[k]).abs().max().item() for k in differ):.3g}: {differ[:4]}")
        for name in ("hypotheses.txt", "hypotheses.test_long.txt"):
            assert (warm_cell / name).read_bytes() == (cold_cell / name).read_bytes(), (placement, name)
        # commands.sh still holds the stock commands a user reruns by hand
        assert "-m posenc.trainer.train " in (warm_cell / "commands.sh").read_text()


def test_a_bad_warm_trainer_setting_is_refused_in_one_line(tmp_path):
    proc = posenc_run("budget=smoke", "runtime.warm_trainer=maybe", f"hydra.run.dir={tmp_path / 'cell'}",
                      cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "runtime.warm_trainer='maybe' is not allowed; allowed: true" in proc.stderr + proc.stdout


def test_a_forked_cell_shows_its_own_command_line_and_keeps_its_environment(tmp_path):
    """setproctitle writes the title within the argument area (SPT_NOENV, for the call only): the
    environment the process started with is its /proc/PID/environ still, byte for byte."""
    code = ("import os, posenc.trainer.warm as w; w.retitle(['python', '-m', 'posenc.trainer.train', 'DATA', 'a b']); "
            "import sys; open(sys.argv[1], 'wb').write(open('/proc/self/cmdline', 'rb').read().rstrip(b'\\0') "
            "+ b'|' + open('/proc/self/environ', 'rb').read() + b'|' + str('SPT_NOENV' in os.environ).encode())")
    env = {"PATH": os.environ["PATH"], "MARKER": "kept", **({"PYTHONPATH": os.environ["PYTHONPATH"]}
                                                             if "PYTHONPATH" in os.environ else {})}
    seen = tmp_path / "seen"
    subprocess.run([sys.executable, "-c", code, str(seen), " " * 200], env=env, timeout=120, check=True,
                   capture_output=True)
    cmdline, environ, left = seen.read_bytes().split(b"|")
    assert cmdline == b"python -m posenc.trainer.train DATA 'a b'"
    assert environ == b"".join(f"{k}={v}\0".encode() for k, v in env.items()) and left == b"False"


def test_where_no_warm_trainer_starts_the_cell_starts_cold_and_says_why(monkeypatch):
    monkeypatch.setattr(warm, "PROGRAM", ("-c", "import sys; sys.exit('no fairseq on this machine')"))
    monkeypatch.setattr(warm, "SLOT", warm._Slot())
    said = []
    start = warm.starter(dict(os.environ), say=said.append)
    assert start is child.start
    assert said == ["posenc: the warm trainer did not start: no fairseq on this machine (exit status 1); "
                    "the trainer starts cold"]


def test_killing_posenc_run_alone_takes_the_warm_trainer_and_its_cell_with_it(tmp_path):
    cell = tmp_path / "cell"
    env = child_env(tmp_path / "cache")
    with open(tmp_path / "out", "w") as out:
        proc = subprocess.Popen([str(BIN / "posenc-run"), "budget=smoke", "budget.max_epoch=0", "budget.max_update=500",
                                 *SMALL_DATA, f"hydra.run.dir={cell}"], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        trainer = wait_for_trainer(cell)
        keeper = parent_of(trainer)
        assert "posenc.trainer.warm" in cmdline(keeper) and parent_of(keeper) == proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while (alive(trainer) or alive(keeper)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(trainer) and not alive(keeper)
    finally:
        proc.kill()


def wait_for_trainer(cell: Path, timeout: float = 300) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").glob("[0-9]*"):
            text = cmdline(int(proc.name))
            if "posenc.trainer.train" in text and str(cell) in text:
                return int(proc.name)
        time.sleep(0.2)
    raise AssertionError(f"no trainer of {cell} appeared")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        state = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "zombie" not in state
