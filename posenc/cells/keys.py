"""The configuration keys that never change a cell's result, in one annotated list.

Its four users read it from here: the config hash that tells a finished cell from one to run again
and the training hash that keeps a cell's checkpoints (both ``posenc.harness.hashing``), Hydra's
naming of cell directories (``conf/config.yaml`` reads ``${posenc_keys:not_naming}``) and the
table's rows (``posenc.cells.sweep``).
"""

from omegaconf import OmegaConf

# Key (top-level or dotted; an override of a dotted key is named by its full key) -> why it never
# changes a result. Left out of the config hash, of a cell's directory name and of the table's rows.
NOT_OUTCOME = {
    "hydra": "Hydra's own node: where files go, how cells are launched",
    "progress": "a status line per epoch on stderr",
    "paths": "where the corpus cache is; it is content-addressed, so moving it moves nothing",
    "paths.cache_dir": "(as paths)",
    "logger": "logging to W&B or not: the same cell",
    "logger.project": "(as logger)",
    "logger.entity": "(as logger)",
    "logger.mode": "(as logger)",
    "logger.group": "(as logger)",
    "logger.tags": "(as logger)",
    "logger.notes": "(as logger)",
    "runtime": "how fairseq's children use the machine: thread counts, OpenMP waiting (runtime.deterministic "
               "enters the hashes on its own where it changes a result: posenc.harness.hashing)",
    "runtime.threads": "(as runtime)",
    "runtime.omp_wait_policy": "(as runtime)",
    "runtime.cells_per_gpu": "(as runtime): how many cells share a GPU side by side",
    "runtime.warm_trainer": "(as runtime): forked from a warm trainer or started cold, the cell trains byte for "
                            "byte the same (tests/test_warm_trainer.py)",
    "redo": "run a finished cell again (all, or those resumed inexactly): the same configuration",
    "budget.step_timeout_min": "the hard safety limit of one step: a step it stops fails and a rerun "
                               "resumes it, exactly (posenc.trainer.exact_resume), so the scores are those of an "
                               "uninterrupted cell",
}

# Key -> why it changes how a trained model is scored or labelled but not what training produces:
# changing one keeps the cell's checkpoints (a new beam rescores the trained model).
NOT_TRAINING = {
    "generation": "beam, batch size, output length, the long split: scoring only",
    "keep_checkpoints": "what stays on disk once a cell finished",
    "experiment_name": "the preset's label in the record",
    "skip_impossible": "whether a grid sweep leaves out the cells a model cannot do",
}

# Key -> why it changes a result but never names a cell's directory.
NOT_NAMING = {
    "experiment": "the preset: its swept values name the cell themselves",
    "data.train": "a path: a slash would nest directories, and moving a corpus must not move cells",
    "data.valid": "(as data.train)",
    "data.test": "(as data.train)",
    "data.mirror": "(as data.train)",
    "data.dir": "(as data.train): the sweep's directory names it instead (posenc.cells.naming)",
    "data.references.test": "(as data.train)",
    "data.references.test_long": "(as data.train)",
    "kinds_module": "(as data.train): the hashes take the file's content, the kinds it registers name the cells",
    "runtime.deterministic": "how a GPU's kernels run: where it changes the result it enters the hashes, and "
                             "the cell trains anew in the same directory",
}

# Keys (top-level or dotted) added after cells were hashed, whose null means what their absence meant:
# left out of the hashes while null, so every cell hashed before them keeps its result and checkpoints.
NULL_IS_ABSENT = {
    "trial": "added with the tune strategy (issue 24): null is a cell scored on test, as every cell before",
    "kinds_module": "added with the user's kinds file (issue 31): null is the built-in kinds, as every cell before",
    "data.length_split": "added with the length split (issue 31): null is the corpus as given, as every cell before",
    "data.test_long_size": "(as data.length_split)",
    "data.length_split_by": "(as data.length_split)",
}

# Keys a sweep may vary that are not a row of the table: the seeds of a row, and the preset.
NOT_A_ROW = {
    "seed": "a row's seeds are averaged",
    "experiment": "the preset's own swept keys are the rows",
}


def not_naming() -> list:
    """Hydra's ``override_dirname.exclude_keys``: every key that does not name a cell."""
    return [key for key in {**NOT_NAMING, **NOT_OUTCOME} if key != "hydra"]


def not_a_row() -> set:
    return set(NOT_A_ROW) | set(NOT_OUTCOME)


def not_naming_a_sweep() -> set:
    """Keys that never name a sweep's directory: those that never change a result, and the preset
    (and its label), which the directory's base names already."""
    return set(NOT_OUTCOME) | {"experiment", "experiment_name"}


RESOLVER = "posenc_keys"
SWEEP_RESOLVER = "posenc_sweep"
CELL_RESOLVER = "posenc_cell"
_LISTS = {"not_naming": not_naming}


def register_resolver() -> None:
    """The project's resolvers, for a config that names them: ``${posenc_keys:not_naming}`` (the list
    above), ``${posenc_sweep:BASE,${hydra.overrides.task}}`` (a sweep's directory,
    ``posenc.cells.naming.sweep_dir``) and ``${posenc_cell:${hydra.job.override_dirname}}`` (a cell's, one
    folder). Called where a config that names them is composed or read (``posenc-run``'s application, the
    plan reader, the tests' and scripts' compose calls); once per process is enough, and a second call does
    nothing. ``posenc_sweep`` is cached, as Hydra's ``now`` is: each cell's config gets the sweep's cache
    (Hydra's ``load_sweep_config``), so a cell, whose own overrides differ from the command line's, finds
    its sweep's directory, not one named from its own overrides."""
    from posenc.cells.naming import one_folder, sweep_dir

    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda name: _LISTS[name]())
    if not OmegaConf.has_resolver(SWEEP_RESOLVER):
        OmegaConf.register_new_resolver(
            SWEEP_RESOLVER, lambda base, task: sweep_dir(base, task, not_naming_a_sweep()), use_cache=True)
    if not OmegaConf.has_resolver(CELL_RESOLVER):
        OmegaConf.register_new_resolver(CELL_RESOLVER, one_folder)
