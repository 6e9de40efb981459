"""What posenc's adaptive sweepers share with Hydra's own: the configured launcher, and batches
launched through it with job numbers that go on from one batch to the next; and the one loop that
drives a planner (the seeds strategy's, ``posenc.harness.sweep.planner``, or the tune strategy's,
``posenc.harness.sweep.tune_planner``; neither has Hydra in it) batch by batch."""

import logging
import time
from pathlib import Path

from hydra.plugins.sweeper import Sweeper

from posenc.cells.strategy import write_state
from posenc.cells.sweep import read_sweep
from posenc.harness.run.signals import STOP

log = logging.getLogger(__name__)


class LaunchingSweeper(Sweeper):
    """A Sweeper that decides each batch itself and launches it through the configured launcher
    (basic, joblib, submitit_local, submitit_slurm, the ``slurm`` preset), as hydra-optuna-sweeper does."""
    config = launcher = hydra_context = None
    job_idx = 0

    def setup(self, *, hydra_context, task_function, config) -> None:
        from hydra.core.plugins import Plugins
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def launch(self, jobs: list):
        """Launch one batch (each job its overrides); returns the launcher's results."""
        self.validate_batch_is_legal(jobs)
        results = self.launcher.launch(jobs, initial_job_idx=self.job_idx)
        self.job_idx += len(jobs)
        return results

    def drive(self, planner, sweep_dir: Path) -> list:
        """Launch what ``planner`` asks for, batch by batch, until it asks for nothing or a stop is
        requested; returns the launcher's results. The planner is asked ``next_jobs(sweep)`` (the
        sweep as it stands; ``planner.Launch`` values), ``state()`` (written before its batch is launched, so
        the state names the batch before it runs) and ``batch_words(count)`` (the log's words)."""
        returns = []
        while not STOP.requested:
            started = time.perf_counter()
            batch = planner.next_jobs(read_sweep(sweep_dir))
            write_state(sweep_dir, planner.state())
            if not batch:
                break
            log.info(f"{planner.batch_words(len(batch))} (decided in {time.perf_counter() - started:.2f} s): "
                     + "; ".join(job.label for job in batch))
            returns.append(self.launch([job.overrides for job in batch]))
        return returns
