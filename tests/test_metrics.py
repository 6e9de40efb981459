"""posenc.metrics is the metrics' one home: the one module of posenc/ that imports sacreBLEU (with
its vectorised scorers beside it), a leaf of the package, and what a record keeps of each metric
(its options as data) reproduces the metric's signature."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF

from posenc import metrics
from posenc.cells.record import Record, bleu_options, chrf_options
from posenc.metrics import chrf_signature_options
from posenc.report.outputs import STATS_CACHE, score_output

POSENC = Path(__file__).resolve().parents[1] / "posenc"
SACREBLEU_HOMES = {"metrics.py", "metrics_vector.py"}


def imported_modules(path: Path) -> set:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_only_the_metrics_modules_import_sacrebleu():
    importers = {str(path.relative_to(POSENC)) for path in POSENC.rglob("*.py")
                 if any(name.split(".")[0] == "sacrebleu" for name in imported_modules(path))}
    assert importers == SACREBLEU_HOMES


def test_the_metrics_are_a_leaf():
    for name in SACREBLEU_HOMES:
        ours = {m for m in imported_modules(POSENC / name) if m.split(".")[0] == "posenc"}
        assert ours <= {"posenc.atomic"}, (name, ours)


def test_the_statistics_and_the_sweepers_config_do_not_import_sacrebleu():
    # The verdict's module scores through posenc.metrics_vector, which imports sacreBLEU only in
    # the functions that score: planning with the statistics does not pay for it.
    code = ("import sys, posenc.harness.sweep.config, posenc.stats.verdict, posenc.stats.power, "
            "posenc.stats.sequential; print(sorted(m for m in sys.modules if m.split('.')[0] == 'sacrebleu'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=POSENC.parent)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("lowercase", [False, True])
def test_a_records_chrf_options_reproduce_its_chrf_signature(tmp_path, lowercase):
    hyps, refs = ["The cat sat on the mat .", "A dog ran ."], ["The cat sat on a mat .", "The dog ran ."]
    (tmp_path / "hypotheses.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    scores = score_output(tmp_path, "hypotheses.txt", hyps, refs, "key", "test", lowercase, hyps, refs)
    record = Record.from_dict(scores)
    assert chrf_options(record) == scores["chrf_options"] == chrf_signature_options(scores["chrf_signature"])
    chrf = CHRF(**chrf_options(record))
    assert round(chrf.corpus_score(hyps, [refs]).score, 2) == scores["chrf"]
    assert str(chrf.get_signature()) == scores["chrf_signature"]
    bleu = BLEU(**bleu_options(record))
    assert round(bleu.corpus_score(hyps, [refs]).score, 2) == scores["bleu"]
    assert str(bleu.get_signature()) == scores["bleu_signature"]
    # An old record, without chrf_options, reads the same options back from its signature
    old = Record.from_dict({k: v for k, v in scores.items() if k != "chrf_options"})
    assert chrf_options(old) == scores["chrf_options"]
    assert len(list((tmp_path / STATS_CACHE).iterdir())) == 2   # BLEU's and chrF's statistics


def test_records_from_before_chrf_read_chrf_plus_plus_with_bleus_casing():
    signature = "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0"
    assert chrf_options(Record.from_dict({"bleu_signature": signature})) == metrics.chrf_options(lowercase=True)
    assert chrf_options(Record.from_dict({})) == metrics.chrf_options()
