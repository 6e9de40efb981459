"""``posenc-run``: the Hydra application. One job is one cell; ``-m`` runs a sweep of cells."""

import statistics
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from posenc.cells.record import Record, is_ok
from posenc.cells.sweep import SweepError, read_sweep
from posenc.confdir import CONF_DIR
from posenc.corpora import CorpusError
from posenc.harness.cell.resolve import refused_record, resolve_cell
from posenc.harness.cell.spec import check_values
from posenc.harness.errors import ConfigError
from posenc.harness.launch import slurm_job
from posenc.harness.launch.parallel import cell_resources
from posenc.harness.run import signals
from posenc.harness.run.lifecycle import run_cell
from posenc.harness.run.pruning import trial_pruning
from posenc.harness.sweep.report import SweepReport
from posenc.harness.tracking.progress import CellProgress
from posenc.kinds import grid_skip_reason


def cell_label(cfg, hydra_cfg, planned: int) -> str:
    where = f"placement={cfg.placement} pe={cfg.pe} seed={cfg.seed} model={cfg.model.name}"
    if cfg.get("trial") is not None:
        where += f" trial={cfg.trial}"
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return where
    return f"cell {hydra_cfg.job.num + 1}/{planned or '?'} {where}"


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
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    signals.install()
    sweep = sweep_so_far(Path(hydra_cfg.sweep.dir)) if multirun else None
    # An adaptive sweep decides its cells batch by batch: no total to count a cell against.
    planned = len(sweep.plan_values) if sweep and sweep.planned and not sweep.strategy else 0
    progress = CellProgress(cell_label(cfg, hydra_cfg, planned), int(cfg.budget.max_epoch),
                            float(cfg.budget.max_time_min), enabled=bool(cfg.progress))
    if signals.STOP.requested:  # an earlier cell of this sweep was interrupted: start nothing new
        progress.say("not started: the sweep was interrupted")
        return
    if planned:
        eta = sweep_eta(sweep, planned - hydra_cfg.job.num)
        if eta is not None:
            progress.say(f"sweep: {planned - hydra_cfg.job.num} cells to go, about {eta:.1f} min at the pace so far")
    job_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        with signals.interruptible():
            if cfg.skip_impossible:
                check_values(cfg)  # a misspelt value is an error, not a cell to skip
                reason = grid_skip_reason(cfg.model.family, cfg.pe, cfg.placement)
                if reason:
                    progress.say(f"skipped by design: {reason}")
                    return
            cell = resolve_cell(cfg)  # every refusal, before any work
            # Cells side by side (joblib, submitit_local) share the cores; joblib cells get GPUs of their own.
            home = Path(hydra_cfg.sweep.dir) if multirun else job_dir
            with cell_resources(cfg, hydra_cfg.launcher, planned, home, say=progress.say) as child_env:
                pruning = trial_pruning(home, job_dir) if multirun and cell.is_trial else None
                record = run_cell(cell, job_dir, progress, child_env, pruning)
    except (ConfigError, CorpusError) as err:
        # Refused before any training; one line, no traceback. A sweep records the cell as failed
        # and goes on: its summary line and exit status report it.
        print(f"posenc-run: error: {err}", file=sys.stderr)
        if not multirun:
            sys.exit(2)
        refused_record(cfg, job_dir, str(err)).write(job_dir)
        return
    except signals.StopRequested as stop:  # before the cell's training started
        progress.say(f"not started: {stop}")
        record = None
        if slurm_job.job_id():  # the job's end must say why (a time limit here would loop: it is not requeued)
            signals.STOP.cause = slurm_job.stop_cause(stop.signum)
            record = slurm_job.unstarted(Record.read(job_dir) or refused_record(cfg, job_dir, ""), signals.STOP.cause)
            record.write(job_dir)
    if signals.STOP.requested and slurm_job.job_id():  # requeue the job, or let it end, as the stop asks
        cause = signals.STOP.cause or slurm_job.stop_cause(signals.STOP.signum)
        status = record and record.status
        slurm_job.hand_over(record, cause)
        if record and record.status != status:
            record.write(job_dir)
            progress.say(f"FAILED: {record.error}")
    if multirun:
        return  # a sweep goes on to the next cell (or past the rest, when interrupted); its end reports
    if signals.STOP.requested:
        sys.exit(signals.STOP.exit_status())
    if not record.ok:
        sys.exit(1)


def main() -> None:
    """``posenc-run``: one cell, or a sweep (``-m``) that exits non-zero when any cell failed,
    was interrupted or never reported (after writing its tables and summary line)."""
    signals.install()  # before Hydra starts any launcher: a signal to this process reaches its cells
    try:
        run_job()
    except signals.StopRequested as stop:  # a second signal, or one between Hydra's own steps
        print(f"posenc-run: {stop}", file=sys.stderr)
        sys.exit(128 + stop.signum)
    if SweepReport.exit_status:
        sys.exit(SweepReport.exit_status)


if __name__ == "__main__":
    main()
