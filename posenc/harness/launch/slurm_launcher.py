"""The ``slurm`` preset's launcher: Hydra's submitit SLURM launcher, with a submitter that notices
what SLURM does to the cells' jobs and never trains a cell twice at once.

Hydra's launcher waits on submitit's ``job.results()``, which learns a job's state from ``sacct``
at most every few minutes (and never without accounting), and raises when a job ended without a
result: a job cancelled while it was pending kept the submitter waiting, and one that ended badly
stopped the sweep before its tables. This launcher submits the same array job with the same
options, then polls ``squeue`` (every ``POLL_S``; ``sacct`` only for a job squeue no longer shows)
and, for each cell,

- takes the job's result when it wrote one (the cell's record is the cell's own);
- when the job ended without a result (cancelled while pending, killed, a node that failed),
  records the cell as ``interrupted`` (cancelled) or ``failed`` with SLURM's state as the reason,
  keeping what the cell's own record says;
- keeps waiting while the job is pending, running or requeued.

A signal to the submitter stops the waiting (the jobs go on): the sweep writes its tables and its
summary line and exits non-zero. A cell whose job from an earlier submitter still runs (the
submitter was lost: an SSH session that died) is not submitted again; it is waited for.
"""

import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import hydra_plugins.hydra_submitit_launcher as hydra_submitit
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as HydraSlurmLauncher
from omegaconf import OmegaConf

from posenc.cells.plan import override_dirname
from posenc.cells.record import Record, is_interrupted
from posenc.harness.errors import ConfigError
from posenc.harness.launch.slurm_groups import KEY, CellGroup, cells_per_task, groups
from posenc.harness.run.lock import running_job
from posenc.harness.run.records import ended_without_result
from posenc.harness.run.signals import STOP

log = logging.getLogger(__name__)

# The hydra-submitit-launcher whose internals PosencSlurmLauncher copies (launch()'s executor, _EXECUTOR, the
# arguments it maps over); pyproject.toml pins it, and tests/test_slurm_records.py fails loudly on any other.
TESTED_SUBMITIT_LAUNCHER = "1.2.0"
POLL_S = 5.0
ALIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
         "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "PREEMPTED", "RESV_DEL_HOLD"}
# A job that just ended may still be writing its result (a shared file system shows it late): seconds to
# wait for it when squeue shows the job's final state, and when squeue no longer shows the job at all.
RESULT_GRACE_S = (5.0, 30.0)


def submitit_launcher_version_problem() -> str:
    """Why the installed hydra-submitit-launcher may not be the one this launcher was tested with, or ""."""
    installed = hydra_submitit.__version__
    if installed != TESTED_SUBMITIT_LAUNCHER:
        return (f"hydra-submitit-launcher {installed} is installed; posenc's slurm launcher copies its internals "
                f"(launch()'s executor, _EXECUTOR), tested with hydra-submitit-launcher {TESTED_SUBMITIT_LAUNCHER} "
                "only (pyproject.toml pins it)")
    return ""


def queue_states(job_ids):
    """``{job id: state}`` for the jobs squeue still shows (array elements one by one), or None when
    squeue did not answer (a busy slurmctld times out): that says nothing about the jobs."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T",
                              "--jobs=" + ",".join(sorted(job_ids))], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 and not out.stdout.strip():
        return None
    return dict(line.strip().split("|", 1) for line in out.stdout.splitlines() if "|" in line)


def accounted_state(job_id: str) -> str:
    """The job's final state in SLURM's accounting, or "" without accounting."""
    try:
        out = subprocess.run(["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State",
                              f"--jobs={job_id}"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.stdout.splitlines():
        jid, _, state = line.partition("|")
        if jid == job_id:
            return state.split()[0] if state else ""
    return ""


def check_gpus(job_overrides, gpus_per_node) -> None:
    """One array job has one ``--gpus-per-node`` (``gpus_per_node: ${gpus}`` is resolved once, from the
    base config): a cell that asks for other GPUs is refused before anything is submitted."""
    asked = {o.split("=", 1)[1] for overrides in job_overrides for o in overrides if o.split("=", 1)[0] == "gpus"}
    other = sorted(asked - {str(gpus_per_node)})
    if other:
        print(f"posenc-run: error: gpus={','.join(other)} in a SLURM sweep whose jobs all get "
              f"hydra.launcher.gpus_per_node={gpus_per_node} (one array job, one allocation size); allowed: "
              f"one gpus value per command, e.g. posenc-run -m ... gpus={other[0]}", file=sys.stderr)
        sys.exit(2)


class PosencSlurmLauncher(HydraSlurmLauncher):
    """``hydra/launcher=slurm``: Hydra's SLURM launcher (the same sbatch options, the same job code)
    with its own waiting (see the module), and several cells in one array task (``cells_per_task``,
    ``posenc.harness.launch.slurm_groups``)."""

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self.cells_per_task = self.params.pop(KEY, 1)  # ours, not an sbatch option of submitit's

    def _executor(self):
        # The executor exactly as Hydra's launcher builds it (launch() of TESTED_SUBMITIT_LAUNCHER).
        import submitit
        params = self.params
        specific_init_keys = {"max_num_timeout"}
        init_params = {"folder": params["submitit_folder"],
                       **{f"{self._EXECUTOR}_{x}": y for x, y in params.items() if x in specific_init_keys}}
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        baseparams = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{x if x in baseparams else f"{self._EXECUTOR}_{x}": y for x, y in params.items()
                                      if x not in specific_init_keys | {"submitit_folder"}})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        try:
            per_task = cells_per_task(self.cells_per_task)
        except ConfigError as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
        check_gpus(job_overrides, self.params.get("gpus_per_node"))
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        naming = self.config.hydra.job.config.override_dirname
        submit, watched = [], {}
        parser = OverridesParser.create()
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            cell_dir = sweep_dir / override_dirname(parser.parse_overrides(list(overrides)), naming)
            elsewhere = running_job(cell_dir)
            if elsewhere and (queue_states([elsewhere]) or {}).get(elsewhere, "") in ALIVE:
                log.info(f"\t#{idx} : running in SLURM job {elsewhere} of an earlier posenc-run: waiting for it")
                watched.setdefault(elsewhere, []).append((0, cell_dir))
                continue
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            submit.append((idx, overrides, cell_dir))
        self._overrides = {cell_dir: list(o) for _, o, cell_dir in submit}
        results = self._submit(submit, per_task, sweep_dir, watched) if submit else {}
        self._wait(watched, results)
        return [JobReturn(overrides=list(o), status=JobStatus.COMPLETED, _return_value=None) for o in job_overrides]

    def _submit(self, submit: list, per_task: int, sweep_dir: Path, watched: dict) -> dict:
        """One array job: a task per cell, or per group of ``per_task`` cells (one SLURM task, a process,
        per cell of it). Adds ``{job id: [(rank, cell dir)]}`` to ``watched``; returns ``{job id: job}``."""
        params = [(list(o), "hydra.sweep.dir", i, f"job_id_for_{i}", Singleton.get_state()) for i, o, _ in submit]
        executor = self._executor()
        if per_task == 1:  # as before cells_per_task: the launcher itself is each task's function
            jobs = executor.map_array(self, *zip(*params))
            cells = [[cell_dir] for _, _, cell_dir in submit]
        else:
            executor.update_parameters(tasks_per_node=per_task)
            jobs = executor.map_array(CellGroup(self), groups(params, per_task))
            cells = groups([cell_dir for _, _, cell_dir in submit], per_task)
            log.info(f"{per_task} cells a SLURM array task (hydra.launcher.{KEY}), each its own SLURM task")
        log.info(f"SLURM jobs {', '.join(j.job_id for j in jobs)} in {sweep_dir}")
        for job, group in zip(jobs, cells):
            watched[job.job_id] = list(enumerate(group))
        return {j.job_id: j for j in jobs}

    def _wait(self, watched: dict, jobs: dict) -> None:
        """Until every watched job ended (or a signal to this process says to stop waiting). ``watched``:
        ``{job id: [(rank, cell dir)]}``, the cells of each job still to report (rank: its SLURM task)."""
        gone_since = {}
        while watched and not STOP.requested:
            states = queue_states(list(watched))
            if states is None:  # no answer this round: ask again, without judging any job by it
                time.sleep(POLL_S)
                continue
            for job_id, cells in list(watched.items()):
                job = jobs.get(job_id)
                if job is not None:
                    cells[:] = [(rank, cell_dir) for rank, cell_dir in cells if not taken(job.task(rank), cell_dir)]
                if not cells:
                    del watched[job_id]
                    continue
                state = states.get(job_id, "")
                if state in ALIVE:
                    gone_since.pop(job_id, None)
                    continue
                first = gone_since.setdefault(job_id, time.monotonic())
                if job is not None and time.monotonic() - first < RESULT_GRACE_S[0 if state else 1]:
                    continue  # just ended: its results may still be on their way
                if job is None and all(finished_by_itself(cell_dir) for _, cell_dir in cells):
                    del watched[job_id]  # an earlier submitter's job, finished: its cells reported
                    continue
                state = state or accounted_state(job_id)
                if state.split(" ")[0] in ALIVE:  # accounting still sees it alive (squeue lost it a moment)
                    continue
                for _, cell_dir in cells:
                    ended_without_result(cell_dir, job_id, state, getattr(self, "_overrides", {}).get(cell_dir, ()))
                del watched[job_id]
            if watched:
                time.sleep(POLL_S)
        if watched:
            log.warning(f"stopped waiting; SLURM jobs {', '.join(watched)} go on (rerun the command to collect them)")


def taken(task, cell_dir: Path) -> bool:
    """Whether the cell's SLURM task (a submitit job, or one task of it) wrote its result: taken, and
    where its own code raised, the cell recorded as failed with why (it may not have said)."""
    if not task.paths.result_pickle.exists():
        return False
    try:
        task.results()
    except Exception as err:
        ended_without_result(cell_dir, task.job_id, f"failed ({str(err).strip().splitlines()[-1][:300]})")
    return True


def finished_by_itself(cell_dir: Path) -> bool:
    earlier = Record.read(cell_dir)
    return earlier is not None and not is_interrupted(earlier)
