"""The root config's own settings and their defaults, in one place: the structured config that
``hydra_plugins/posenc_config`` stores in Hydra's ConfigStore as ``posenc_schema``, which
conf/config.yaml lists in its defaults (right before ``_self_``) and then only says what each
setting means. The groups (optim, model, data, budget, logger, runtime) are their presets'; the
data group's common keys are ``posenc.corpora.config.DataSchema``'s. No Hydra here: the cell's
resolution reads the defaults too, for a key a config leaves out.

Every field is typed ``Any``: the cell's resolution checks each value itself and refuses a bad one
in one line naming it (``ConfigError``; OmegaConf's own type errors are tracebacks). The fields'
order is the order the composed config shows them in. A new field is a new key of every cell's
config and so of its hash (``posenc.harness.hashing``): add one as null, and name it in
``posenc.cells.keys.NULL_IS_ABSENT``, so that the cells before it keep theirs.
"""

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class GenerationSchema:
    """How a cell's test split is decoded and scored (fairseq-generate)."""
    beam: Any = 5
    batch_size: Any = 128
    # Output length is bounded by the source length (max_len_a * src_len + max_len_b): an
    # undertrained model that repeats tokens cannot run every sentence to fairseq's 200 cap.
    max_len_a: Any = 1.5
    max_len_b: Any = 10
    test_long: Any = False      # also score the longer-than-training split, where the corpus has one


@dataclass
class PathsSchema:
    # Binarized corpora are cached here, shared by every cell and sweep (content-addressed).
    cache_dir: Any = "${oc.env:POSENC_CACHE,${hydra:runtime.cwd}/.posenc_cache}"


@dataclass
class RootSchema:
    placement: Any = "both"          # where positions go: posenc.kinds.PLACEMENTS
    pe: Any = "learned"              # their kind wherever placement puts one: a registered kind
    seed: Any = 1
    kinds_module: Any = None         # a Python file of your own that registers position kinds; null: none
    precision: Any = "fp32"          # posenc.harness.config.precision.PRECISIONS
    gpus: Any = 1                    # GPUs per cell; 0: the CPU even on a GPU machine
    experiment_name: Any = "single"  # experiment presets set this; recorded in result.json
    skip_impossible: Any = False     # grid sweeps: leave out cells a model cannot do instead of failing
    trial: Any = None                # a tuning trial's number (hydra/sweeper=posenc_tune sets it)
    generation: Any = field(default_factory=GenerationSchema)
    paths: Any = field(default_factory=PathsSchema)
    keep_checkpoints: Any = "best"   # best | all | none
    redo: Any = False                # true: run finished cells again from scratch; inexact: those resumed inexactly
    progress: Any = True             # a status line per epoch on stderr


def root_defaults() -> dict:
    """``RootSchema``'s defaults as plain data (nested settings as dicts), as ConfigStore holds them."""
    return asdict(RootSchema())


def default(key: str):
    """The default of the root config's top-level ``key``, for a config that leaves it out."""
    return root_defaults()[key]
