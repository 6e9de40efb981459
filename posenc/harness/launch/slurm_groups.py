"""``hydra.launcher.cells_per_task=N`` of the ``slurm`` preset: N cells of a sweep in one array task,
side by side on its GPU(s), so that a cluster that bills GPU hours does not bill a whole GPU for a
few percent of its use.

submitit's own way: the array task asks SLURM for N tasks (``--ntasks-per-node=N``); ``srun``
starts one process per task, each with its own ``cpus_per_task`` cores, all seeing the task's
``gpus_per_node`` GPU(s); task ``SLURM_PROCID`` runs the group's cell of that rank. Each process is
a whole cell as it is with one cell a task: SLURM's signals reach every one of them, each saves
and records itself (``posenc.harness.run.slurm_group`` lets the last of them requeue the task).
"""

from posenc.harness.errors import ConfigError

KEY = "cells_per_task"


def cells_per_task(value) -> int:
    """The setting as a whole number >= 1, or ConfigError in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"hydra.launcher.{KEY}={value} is not allowed; allowed: a whole number >= 1 of "
                          "cells that share one array task and its GPU(s) (1, the default: a task per cell)")
    return value


def groups(items: list, size: int) -> list:
    """``items`` in runs of ``size``, in order (the last may be shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


class CellGroup:
    """The function of an array task that runs several cells: each of its SLURM tasks runs the cell
    of its rank through the launcher's own job function (Hydra's submitit ``__call__``); a rank the
    last, shorter group has no cell for returns at once. ``checkpoint`` is what submitit calls on
    the time-limit warning: the task is requeued with the same group."""

    def __init__(self, launcher):
        self.launcher = launcher

    def __call__(self, group: list):
        import submitit
        rank = submitit.JobEnvironment().global_rank
        if rank >= len(group):
            return None
        return self.launcher(*group[rank])

    def checkpoint(self, group: list):
        import submitit
        return submitit.helpers.DelayedSubmission(self, group)
