"""``posenc-prepare [-m] [overrides]``: the corpora a run or sweep names, prepared and cached once, nothing
trained, and where each is said; the sweep typed after it finds its corpus prepared."""

import subprocess

import pytest

from project import BIN, child_env, posenc_run, summary_line

SMALL = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=30",
         "data.generator.test_long=20"]

pytestmark = pytest.mark.slow


def posenc_prepare(*args, cwd, cache):
    return subprocess.run([str(BIN / "posenc-prepare"), *args], cwd=cwd, env=child_env(cache), capture_output=True,
                          text=True, timeout=900)


def test_prepared_once_then_the_sweep_finds_its_corpus(tmp_path):
    cache = tmp_path / "cache"
    sweep = ("-m", "experiment=table4", "budget=smoke", "budget.max_update=2", "seed=1", "placement=both,none", *SMALL)
    prepared = posenc_prepare(*sweep, cwd=tmp_path, cache=cache)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    (line,) = prepared.stdout.splitlines()  # two cells, one corpus
    (entry,) = (cache / "corpora").glob("synthetic-*[!k]")
    assert line == f"prepared synthetic (en-vf; test 30, test_long 20, train 300, valid 40): {entry}"
    assert (entry / "manifest.json").is_file() and not (tmp_path / "results").exists()  # nothing trained
    ran = posenc_run(*sweep, cwd=tmp_path, cache=cache)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert summary_line(ran.stdout) == "2 cells: 2 ok"
    assert ran.stderr.count(f"corpus synthetic: cache hit {entry}") == 2 and "preparing into" not in ran.stderr


def test_every_corpus_of_the_sweep_and_one_line_for_a_bad_one(tmp_path):
    cache = tmp_path / "cache"
    two = posenc_prepare("-m", "data.generator.train=300,301", *SMALL[1:], cwd=tmp_path, cache=cache)
    assert two.returncode == 0, two.stderr[-3000:]
    assert [line.split(";")[1].split(",")[2] for line in two.stdout.splitlines()] == [" train 300", " train 301"]
    bad = posenc_prepare("data=binarized", cwd=tmp_path, cache=cache)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "posenc-prepare: error: data.dir is not set: give it on the command line, e.g. data.dir=..."]
