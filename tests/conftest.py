"""Fixtures shared by the test files (pytest loads this file first, so no test imports a fixture)."""

import os
import random

import pytest

from fairseq_tools import fairseq
from posenc.cells.keys import register_resolver
from project import hidden_fairseq_config_store

# Every process the suite starts trains on one OpenMP thread unless the developer says otherwise.
# make test runs two workers on a 2-core machine: cells at torch's default (one thread per core)
# beside the other worker's spin at OpenMP barriers for a core the other holds. Measured here, two
# smoke cells side by side, twice over: 112-161 s at the default against 21 s at one thread each.
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


def pytest_collection_modifyitems(config, items):
    """The SLURM tests first: their file is the suite's longest (it waits on time limits and
    requeues), so under ``make test``'s two workers it starts at once, beside everything else,
    instead of running alone at the end. The order within each file is kept."""
    items.sort(key=lambda item: item.get_closest_marker("slurm") is None)
