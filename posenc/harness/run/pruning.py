"""A tuning trial's pruning, inside its cell: each epoch's validation loss goes to the trial in its
row's Optuna study (``posenc.harness.study``), and when the study's pruner says the trial will not
win, training stops with a save (the harness's save-and-stop) and the record says ``pruned`` and why.

The trial is found in the tune strategy's state (``posenc.cells.strategy.TuneState``) by the cell's
directory: the pruner's settings are the sweep's, not the cell's config (they decide when a trial
stops, never what it trains).
"""

from pathlib import Path

from posenc.cells.strategy import read_state
from posenc.harness import study
from posenc.harness.fairseq_logs import parse_record


class TrialPruning:
    def __init__(self, trial, pruner_name: str, row_study):
        self.trial, self.pruner_name, self.study = trial, pruner_name, row_study
        self.reason = ""   # why the pruner stopped the trial ("" while it runs on)
        self.epoch = None  # the epoch it was pruned at

    def check(self, line: str):
        """``run_step``'s ``stop_if``: the reason to stop after a validation line, else None."""
        parsed = parse_record(line)
        if not parsed or parsed[0] != "valid" or "valid_loss" not in parsed[1]:
            return None
        epoch, loss = int(parsed[1].get("epoch", 0)), float(parsed[1]["valid_loss"])
        self.trial.report(loss, epoch)
        if not self.trial.should_prune():
            return None
        median = study.finished_median(self.study, epoch)
        against = f" (the median of its row's finished trials there: {median:.3f})" if median is not None else ""
        self.epoch = epoch
        self.reason = (f"pruned by the {self.pruner_name} pruner at the end of epoch {epoch}: validation loss "
                       f"{loss:.3f}{against}; training stopped there with a save, its checkpoints are kept")
        return self.reason


def trial_pruning(sweep_dir: Path, job_dir: Path):
    """The pruning of the trial whose cell is ``job_dir``, or None: no tune strategy, no pruner,
    or a cell its state does not name as a trial."""
    state = read_state(sweep_dir) if sweep_dir else None
    name = getattr(state.settings, "pruner", None) if state else None  # a seeds state has no pruner
    if not name:  # no adaptive sweep, a seeds strategy's, or no pruner
        return None
    try:
        mine = str(Path(job_dir).resolve().relative_to(Path(sweep_dir).resolve()))
    except ValueError:
        return None
    entry = state.trial(mine)
    if entry is None:
        return None
    # (a state from before a pruner setting existed ran its default then: TuneSettings.ran)
    the_pruner = study.pruner(name, state.settings.ran("prune_from_epoch"), state.settings.ran("pruner_startup_trials"))
    trial = study.trial_handle(sweep_dir, entry.study, entry.number, the_pruner)
    return TrialPruning(trial, name, trial.study)
