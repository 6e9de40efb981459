"""``posenc-run``: the Hydra application. One job is one cell; ``-m`` runs a sweep of cells."""

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from posenc.cells.keys import register_resolver
from posenc.cells.record import is_interrupted, is_ok
from posenc.cells.sweep import SweepError, read_sweep
from posenc.confdir import CONF_DIR
from posenc.corpora import CorpusError
from posenc.harness.config.resolve import Resolved, resolve_cell
from posenc.harness.errors import ConfigError
from posenc.harness.launch.sharing import run_sharing
from posenc.harness.presets import experiment_as_override
from posenc.harness.run import records, signals, slurm_job
from posenc.harness.run.lifecycle import Ran, run_cell
from posenc.harness.run.pruning import trial_pruning
from posenc.harness.sweep.report import SweepReport
from posenc.harness.tracking.progress import CellProgress
from posenc.harness.tracking.wandb_run import CellIdentity

SKIPPED = None  # what run() returns for a cell the grid skips by design: nothing to record or hand over

# The config names ${posenc_keys:...}, and Hydra composes it inside run_job(): in this process and in
# every worker a launcher starts (joblib, submitit), which loads this module to unpickle run_job and
# then composes its cell's config before any function of ours runs. So the application registers
# the resolver as it is loaded, the one step that precedes composing in every process.
register_resolver()

@dataclass(frozen=True)
class Job:
    """Hydra's side of this job, never the composed config: a single run or a sweep's cell, where it
    writes, how its sweep launches cells and how many it planned."""
    multirun: bool
    num: int
    job_dir: Path
    home: Path        # the sweep directory (multirun) or the run directory (one cell)
    launcher: object
    sweep: object     # the sweep this cell belongs to, read once (its plan and the records so far), or None
    planned: int      # the sweep's planned cells; 0 where there is no total to count a cell against
    name: str         # the cell's override dirname (e.g. placement=source,seed=2): its W&B run's name
    shown_dir: str    # the home as configured, for the W&B group's name

    @property
    def identity(self) -> CellIdentity:
        return CellIdentity(self.name, self.home, self.shown_dir)

    @classmethod
    def current(cls) -> "Job":
        hydra_cfg = HydraConfig.get()
        multirun = hydra_cfg.mode == RunMode.MULTIRUN
        job_dir = Path(hydra_cfg.runtime.output_dir)
        sweep = sweep_so_far(Path(hydra_cfg.sweep.dir)) if multirun else None
        # An adaptive sweep decides its cells batch by batch: no total to count a cell against.
        planned = len(sweep.plan_values) if sweep and sweep.planned and not sweep.strategy else 0
        shown_dir = str(hydra_cfg.sweep.dir if multirun else hydra_cfg.run.dir)
        return cls(multirun, hydra_cfg.job.num if multirun else 0, job_dir,  # a single run has no job number
                   Path(hydra_cfg.sweep.dir) if multirun else job_dir, hydra_cfg.launcher, sweep, planned,
                   hydra_cfg.job.override_dirname or job_dir.name, shown_dir)


def cell_label(where: str, job: Job) -> str:
    """The cell's words (``CellName.where``), and its place in the sweep, for its progress lines."""
    if not job.multirun:
        return where
    return f"cell {job.num + 1}/{job.planned or '?'} {where}"


def sweep_so_far(sweep_dir: Path):
    """The sweep this cell belongs to, read once (its plan and the records so far), or None."""
    try:
        return read_sweep(sweep_dir)
    except SweepError:
        return None


def sweep_eta(sweep, cells_left: int):
    """Minutes the rest of the sweep should take, from the cells already finished in it."""
    durations = [r.cell_wall_s for r in sweep.records if is_ok(r) and r.cell_wall_s] if sweep else []
    return statistics.fmean(durations) * cells_left / 60 if durations else None


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def run_job(cfg) -> None:
    """One cell, in a straight line: resolve -> refuse or skip -> run -> record -> exit code.
    ``resolve_cell`` is the one reader of ``cfg``; what a failure or a stop ends as is ``cell_job``'s,
    the one wrapper around the work."""
    signals.install()
    job = Job.current()
    stopped_before = signals.STOP.requested  # an earlier cell of this sweep was interrupted: start nothing new
    # Read once; a signal meanwhile is kept, and the work's first step (interruptible) raises it.
    resolved = resolve_cell(cfg)
    progress = CellProgress(cell_label(resolved.name.where, job), resolved.max_epoch, resolved.max_time_min,
                            enabled=resolved.progress)
    if stopped_before:
        progress.say("not started: the sweep was interrupted")
        return
    if job.planned:
        eta = sweep_eta(job.sweep, job.planned - job.num)
        if eta is not None:
            progress.say(f"sweep: {job.planned - job.num} cells to go, about {eta:.1f} min at the pace so far")
    status = cell_job(resolved, job, progress)
    if status:
        sys.exit(status)


def run(resolved: Resolved, job: Job, progress: CellProgress):
    """Skip, or run the checked cell: its ``Ran``, or ``SKIPPED`` (the grid leaves it out by design)."""
    with signals.interruptible():
        if resolved.skipped:
            progress.say(f"skipped by design: {resolved.skipped}")
            return SKIPPED
        cell = resolved.cell
        # Cells side by side (joblib, submitit_local) share the cores; joblib cells share GPUs
        # (runtime.cells_per_gpu), and one that runs out of GPU memory there runs again alone.
        pruning = trial_pruning(job.home, job.job_dir) if job.multirun and cell.trial is not None else None
        return run_sharing(cell, job.launcher, job.planned, job.home, say=progress.say,
                           run=lambda env, shared: run_cell(cell, job.job_dir, progress, env, pruning, job.identity,
                                                            shared))


def cell_job(resolved: Resolved, job: Job, progress: CellProgress) -> int:
    """The one place a job's failure and exit-code policy lives: refuses the cell, or runs it
    (``run``) and turns whatever happened into what the job leaves behind; returns the job's exit
    status.

    A refusal is one line on stderr (a sweep also records the cell as failed and goes on); a signal
    before training began says "not started" (and, in a SLURM job, records why); a stop in a SLURM
    job hands the job over as SLURM and submitit expect (``slurm_job.hand_over``); a single run
    exits with 2 (refused), 128 + the signal (stopped) or 1 (the cell did not finish ok). A sweep's
    cells always return 0: the sweep's end reports them."""
    if resolved.refused is not None:
        return refuse(resolved.refused, resolved.name, job)
    try:
        ran = run(resolved, job, progress)
    except (ConfigError, CorpusError) as err:  # what only running can find: the machine's GPUs, W&B, the corpus's files
        return refuse(err, resolved.name, job)
    except signals.StopRequested as stop:  # before the cell's training started
        progress.say(f"not started: {stop}")
        ran = unstarted(stop, resolved.name, job.job_dir)
    if ran is SKIPPED:
        return 0
    if signals.STOP.requested and slurm_job.job_id():  # requeue the job, or let it end, as the stop asks
        hand_over(ran, job.job_dir, progress)
    if job.multirun:
        return 0  # a sweep goes on to the next cell (or past the rest, when interrupted); its end reports
    if signals.STOP.requested:
        return signals.STOP.exit_status()
    return 0 if ran.record.ok else 1


def refuse(err: Exception, name, job: Job) -> int:
    """Refused before any training; one line, no traceback. A sweep records the cell as failed and
    goes on (its summary line and exit status report it); a single run exits with 2."""
    print(f"posenc-run: error: {err}", file=sys.stderr)
    if not job.multirun:
        return 2
    records.refused(name, job.job_dir, str(err))
    return 0


def unstarted(stop: signals.StopRequested, name, job_dir: Path) -> Ran:
    """A cell stopped before its training began: in a SLURM job, its record says why (the job's end
    must say it; a time limit here would loop, since it is not requeued); elsewhere nothing is written."""
    if not slurm_job.job_id():
        return Ran()
    cause = slurm_job.stop_cause(stop.signum)
    return Ran(records.unstarted(name, job_dir, cause), cause)


def hand_over(ran: Ran, job_dir: Path, progress) -> None:
    """End the SLURM job as the stop asks, on the cause the cell recorded (else the signal's own);
    a requeue submitit refused turns the record into a failure, written and said."""
    record = ran.record
    refusal = slurm_job.hand_over(record is None or is_interrupted(record),
                                  ran.stop_cause or slurm_job.stop_cause(signals.STOP.signum))
    if refusal and record is not None:
        records.not_requeued(record, job_dir, refusal)
        progress.say(f"FAILED: {record.error}")


def main() -> None:
    """``posenc-run``: one cell, or a sweep (``-m``) that exits non-zero when any cell failed,
    was interrupted or never reported (after writing its tables and summary line)."""
    signals.install()  # before Hydra starts any launcher: a signal to this process reaches its cells
    sys.argv[1:] = experiment_as_override(sys.argv[1:])  # +experiment=NAME picks a preset too
    try:
        run_job()
    except signals.StopRequested as stop:  # a second signal, or one between Hydra's own steps
        print(f"posenc-run: {stop}", file=sys.stderr)
        sys.exit(128 + stop.signum)
    if SweepReport.exit_status:
        sys.exit(SweepReport.exit_status)


if __name__ == "__main__":
    main()
