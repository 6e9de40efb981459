"""The tune strategy's Optuna studies, one per row, in one journal file in the sweep directory.

Optuna's journal storage (``JournalFileBackend``) appends every operation to one file under a
file lock: the sweeper and its trial cells, in other processes or in SLURM jobs on other nodes of a
shared filesystem, all read and write the same studies without a database server. The tune planner
asks and tells (``posenc.harness.sweep.tune_planner``); a trial cell reports each epoch's validation loss
to its own trial and asks the pruner whether to stop (``posenc.harness.run.pruning``).
"""

from pathlib import Path

import numpy as np
import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from posenc.cells.strategy import STUDY_FILE

DIRECTION = "minimize"  # the objective: the trial's validation loss
PRUNERS = ("median", "asha")


def storage(sweep_dir: Path) -> JournalStorage:
    return JournalStorage(JournalFileBackend(str(Path(sweep_dir) / STUDY_FILE)))


def sampler(seed: int, row: int, number: int, startup_trials: int) -> optuna.samplers.TPESampler:
    """The sampler that proposes trial ``number`` of row ``row``: seeded from the three, so a rerun
    with the same finished trials proposes the same values whichever process asks."""
    state = int(np.random.SeedSequence([int(seed), int(row), int(number)]).generate_state(1)[0])
    return optuna.samplers.TPESampler(seed=state, n_startup_trials=startup_trials)


def pruner(name, prune_from_epoch: int = 1, startup_trials: int = 2):
    """Optuna's pruner for ``name`` (median, asha) or None: a trial is never pruned before the end
    of epoch ``prune_from_epoch``, nor (median) before ``startup_trials`` trials of its row finished."""
    if name is None:
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=prune_from_epoch)
    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, prune_from_epoch), reduction_factor=3)
    raise ValueError(f"pruner {name!r}")


def open_study(sweep_dir: Path, name: str, *, the_sampler=None, the_pruner=None) -> optuna.Study:
    return optuna.create_study(study_name=name, storage=storage(sweep_dir), direction=DIRECTION,
                               load_if_exists=True, sampler=the_sampler, pruner=the_pruner)


def trial_handle(sweep_dir: Path, name: str, number: int, the_pruner) -> optuna.trial.Trial:
    """Trial ``number`` of the study ``name`` as its cell reports to it: Optuna's ``Trial`` for a
    trial the sweeper asked for, found through the storage's public lookups."""
    store = storage(sweep_dir)
    study = optuna.load_study(study_name=name, storage=store, pruner=the_pruner)
    trial_id = store.get_trial_id_from_study_id_trial_number(store.get_study_id_from_name(name), int(number))
    return optuna.trial.Trial(study, trial_id)


def finished_median(study: optuna.Study, epoch: int):
    """The median validation loss at ``epoch`` of the study's finished trials (None without one)."""
    values = [t.intermediate_values[epoch] for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if epoch in t.intermediate_values]
    return float(np.median(values)) if values else None
