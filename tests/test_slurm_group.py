"""Several cells in one SLURM array task (``hydra.launcher.cells_per_task``), job side: the task's
cells are requeued once, by whichever saved last, never while another still saves
(``posenc.harness.run.slurm_group``). Each cell is a real process with the environment SLURM and
submitit give a task; the requeue itself is a stand-in that says who called it and when."""

import os
import subprocess
import sys
import time

from submitit.core.utils import JobPaths

from posenc.harness.launch.slurm_groups import groups

CELL = r"""
import os, sys, time
from submitit.core.utils import UncompletedJobError
from posenc.harness.run import slurm_group
slurm_group.WAIT_S, slurm_group.POLL_S = 8.0, 0.05
rank = os.environ["SLURM_PROCID"]
time.sleep(float(sys.argv[1]))  # the cell saving its checkpoint
def requeue():
    with open(sys.argv[2], "a") as out:
        out.write(f"{rank} {os.environ['SLURM_PROCID']} {time.time()}\n")
    if sys.argv[3] == "refuse":
        raise UncompletedJobError("Job not requeued because: timed-out too many times.")
    sys.exit(255)  # submitit's handler exits once it requeued
print("returned:", slurm_group.requeue_together(requeue))
"""


def cells(tmp_path, saving: dict, how="requeue"):
    """Start one process per rank of a 2-task array task; returns them and the requeue log."""
    log = tmp_path / "requeued.txt"
    env = dict(os.environ, SUBMITIT_EXECUTOR="slurm", SUBMITIT_FOLDER=str(tmp_path / "%j"), SLURM_JOB_ID="7",
               SLURM_NTASKS="2", SLURM_NNODES="1", SLURM_NODEID="0")
    procs = {rank: subprocess.Popen([sys.executable, "-c", CELL, str(delay), str(log), how], text=True,
                                    env=dict(env, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank)),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for rank, delay in saving.items()}
    return procs, log


def test_the_task_is_requeued_once_after_its_slowest_cell_saved(tmp_path):
    procs, log = cells(tmp_path, {0: 0.0, 1: 3.0})
    outs = [proc.communicate(timeout=60)[0] for proc in procs.values()]
    lines = log.read_text().split()
    assert len(lines) == 3, lines  # once, by one cell, as task 0 (the only task submitit requeues from)
    by, as_rank, at = lines
    assert as_rank == "0"
    saved_1 = (tmp_path / "7" / "requeue-7-0" / "saved.1").stat().st_mtime
    assert float(at) >= saved_1  # not before the slow cell had saved
    assert "returned:" not in "".join(outs)  # neither cell ends with a result: the requeued task goes on


def test_a_cell_that_finished_is_not_waited_for(tmp_path):
    (tmp_path / "7").mkdir()
    JobPaths(tmp_path / "%j", job_id="7", task_id=0).result_pickle.write_bytes(b"done")
    started = time.monotonic()
    procs, log = cells(tmp_path, {1: 0.0})
    procs[1].wait(timeout=60)
    assert log.read_text().split()[:2] == ["1", "0"]  # task 1 requeued the array task, as task 0
    assert time.monotonic() - started < 8.0  # without waiting out WAIT_S for task 0


def test_a_refused_requeue_is_what_both_cells_return(tmp_path):
    procs, log = cells(tmp_path, {0: 0.0, 1: 1.0}, how="refuse")
    outs = [proc.communicate(timeout=60)[0] for proc in procs.values()]
    assert len(log.read_text().splitlines()) == 1
    assert outs == ["returned: Job not requeued because: timed-out too many times.\n"] * 2, outs


def test_cells_are_grouped_in_order_the_last_group_shorter():
    assert groups(list("abcde"), 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert groups(list("abcd"), 1) == [["a"], ["b"], ["c"], ["d"]]
