"""Fixtures shared by the test files (pytest loads this file first, so no test imports a fixture)."""

import os
import random

import pytest

from fairseq_tools import fairseq
from posenc.cells.keys import register_resolver
from project import hidden_fairseq_config_store

# Every process the suite starts trains on one OpenMP thread unless the developer says otherwise.
# make test runs three workers on a 2-core machine: cells at torch's default (one thread per core)
# beside another worker's spin at OpenMP barriers for a core the other holds. Measured here, two
# smoke cells side by side, twice over: 112-161 s at the default against 21 s at one thread each
# (results/benchmarks.md).
# The children the tests start with a bare environment get it too (project.child_env).
os.environ.setdefault("OMP_NUM_THREADS", "1")

register_resolver()  # the tests compose conf/config.yaml, which names ${posenc_keys:...}, in this process


@pytest.fixture
def without_fairseq_config_store():
    """fairseq registers its own ``config`` schema and groups in Hydra's global ConfigStore when it
    is imported (other tests in this process do); hide them while a test composes ours.

    Not autouse: fairseq itself composes from those entries (``convert_namespace_to_omegaconf``
    fails without them), so only the files that compose the project's config ask for it, with
    ``pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")``."""
    with hidden_fairseq_config_store():
        yield


@pytest.fixture(scope="module")
def reversal_corpus(tmp_path_factory):
    """A tiny generated task (target = reversed source), binarized by fairseq-preprocess."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(20)]
    for split, n in (("train", 200), ("valid", 20), ("test", 21)):  # 21: not a multiple of 8
        src = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(n)]
        (root / f"{split}.src").write_text("\n".join(src) + "\n")
        (root / f"{split}.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in src) + "\n")
    fairseq("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref", root / "train",
            "--validpref", root / "valid", "--testpref", root / "test", "--destdir", root / "bin",
            "--joined-dictionary", "--workers", "1", cwd=root)
    return root / "bin"


# The longest files first, the longest at the head (seconds, their tests summed, at 856f0bd with 3
# workers: SLURM 832, the seeds sweeper 756, the tune sweeper 517, the plugin's CLI 372, exact resume
# 319, harness survival 192, the harness end to end 187, the new kinds 175, the launchers 115, the kinds
# registry 112, the warm trainer's faked CUDA fork 100, decoding in the trainer 95, users' kinds 84, the
# data-bin sweeps 83; every other file under 85; 28:43 in all, where CI's clean clone took 24:13).
# make test's workers take whole files in this order (xdist's own reordering, by test count, is off:
# Makefile), so that no long file starts last and keeps the run waiting on it alone.
LONGEST_FIRST = ("test_slurm", "test_seeds_sweeper", "test_tune_sweeper", "test_plugin_cli", "test_exact_resume",
                 "test_harness_survival", "test_harness_e2e", "test_new_kinds_fairseq", "test_launchers_e2e",
                 "test_kind_registry", "test_warm_cuda_fork", "test_decode_in_trainer", "test_kinds_module",
                 "test_binarized")


def pytest_collection_modifyitems(config, items):
    """``LONGEST_FIRST``'s files first, in its order; the others after, as collected. The order within
    each file is kept."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(LONGEST_FIRST)))
