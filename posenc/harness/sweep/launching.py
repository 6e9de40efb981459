"""What posenc's adaptive sweepers share with Hydra's own: the configured launcher, and batches
launched through it with job numbers that go on from one batch to the next."""

from hydra.plugins.sweeper import Sweeper


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
