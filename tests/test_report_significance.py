"""Significance, intervals and buckets against outside references: sacreBLEU's command line and
API on the same files, scipy's t quantiles, closed-form arithmetic."""

import math

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from posenc.metrics import Scorer, bootstrap_ci, corpus_bleu
from posenc.metrics import bleu_signature_options as signature_options
from posenc.report import buckets
from posenc.report.significance import paired_test
from posenc.report.stats import ci95, mean_sd, t975
from report_fixtures import cli_p_value, degrade, synthetic_test_sets


@pytest.fixture(scope="module")
def test_set():
    sources, refs = synthetic_test_sets(test=200, test_long=0)["test"]
    return sources, refs


def stats_of(hyps, refs, options=None):
    return Scorer().sentence_stats(hyps, refs, options or {}, "k")


def test_identical_outputs_are_not_significant(test_set):
    _, refs = test_set
    hyps = degrade(refs, 0.2, seed=1)
    same = list(hyps)  # a separate list with the same lines: the same system run twice
    for test in ("bs", "ar"):
        _, results, _ = paired_test((hyps, stats_of(hyps, refs)), {"same": (same, stats_of(same, refs))}, {},
                                    test, 200)
        assert results["same"].p_value >= 0.5


def test_clearly_different_outputs_are_significant(test_set):
    _, refs = test_set
    good, bad = degrade(refs, 0.1, seed=1), degrade(refs, 0.4, seed=2)
    for test in ("bs", "ar"):
        _, results, signature = paired_test((good, stats_of(good, refs)), {"bad": (bad, stats_of(bad, refs))}, {},
                                            test, 200)
        assert results["bad"].p_value < 0.05
        assert f"{test}:200" in signature and "seed:12345" in signature


@pytest.mark.parametrize("test, flag, n", [("bs", "--paired-bs", 300), ("ar", "--paired-ar", 400)])
def test_p_value_equals_the_sacrebleu_command_line(tmp_path, test_set, test, flag, n):
    _, refs = test_set
    base, system = degrade(refs, 0.2, seed=3), degrade(refs, 0.22, seed=4)  # close: p is not at its floor
    _, results, _ = paired_test((base, stats_of(base, refs)), {"s": (system, stats_of(system, refs))}, {}, test, n)
    expected = cli_p_value(tmp_path, refs, base, system, flag, n)
    assert 1 / (n + 1) < expected < 1
    assert results["s"].p_value == pytest.approx(expected, abs=1e-12)


def test_bleu_options_reproduce_the_signature():
    for options in ({}, {"lowercase": True}, {"tokenize": "intl"}, {"tokenize": "none", "smooth_method": "floor"},
                    {"smooth_method": "add-k", "smooth_value": 2.0, "effective_order": True}):
        signatures = []
        for metric in (BLEU(**options), None):
            metric = metric or BLEU(**signature_options(signatures[0]))
            metric.corpus_score(["a small test ."], [["a small test ."]])  # the signature needs a score
            signatures.append(str(metric.get_signature()))
        assert signatures[1] == signatures[0]


def test_summed_sentence_statistics_give_sacrebleus_corpus_score(test_set):
    _, refs = test_set
    hyps = degrade(refs, 0.3, seed=5)
    stats = np.asarray(stats_of(hyps, refs, {"lowercase": True}))
    assert corpus_bleu(stats.sum(0), {"lowercase": True}) == pytest.approx(
        BLEU(lowercase=True).corpus_score(hyps, [refs]).score, abs=1e-9)


def test_bootstrap_ci_is_sacrebleus(test_set):
    _, refs = test_set
    hyps = degrade(refs, 0.3, seed=6)
    score = BLEU().corpus_score(hyps, [refs], n_bootstrap=300)
    low, high = bootstrap_ci(stats_of(hyps, refs), {}, 300)
    assert (low + high) / 2 == pytest.approx(score._mean) and (high - low) / 2 == pytest.approx(score._ci)


def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in list(range(1, 60)) + [100, 1000]:
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-4)


def test_mean_sd_and_confidence_interval_arithmetic():
    assert mean_sd([1.0, 2.0, 3.0]) == (2.0, 1.0)
    assert mean_sd([None, 5.0]) == (5.0, 0.0) and mean_sd([]) == (None, None)
    low, high = ci95([1.0, 2.0, 3.0])
    assert (low, high) == pytest.approx((2 - 4.3027 / math.sqrt(3), 2 + 4.3027 / math.sqrt(3)), abs=1e-4)
    values = [88.2, 90.9, 91.99, 86.5]
    low, high = ci95(values)
    mean, sd = np.mean(values), np.std(values, ddof=1)
    assert (high - low) / 2 == pytest.approx(3.1824 * sd / 2, abs=1e-3) and (low + high) / 2 == pytest.approx(mean)
    assert ci95([3.0]) is None


def test_buckets_hold_every_sentence_exactly_once(test_set):
    sources, refs = test_set
    hyps = degrade(refs, 0.25, seed=7)
    for edges in ((8, 12), (10, 20, 30, 40), (1,), (5, 6, 7, 8, 9, 10, 11)):
        b = buckets.buckets_for(sources, edges)
        lengths = buckets.source_lengths(sources)
        members = [set(np.flatnonzero(b.index == i)) for i in range(len(edges) + 1)]
        assert sum(len(m) for m in members) == len(sources) and set().union(*members) == set(range(len(sources)))
        lows = (0,) + tuple(e + 1 for e in edges)
        highs = tuple(edges) + (10 ** 9,)
        for i, m in enumerate(members):
            assert all(lows[i] <= lengths[j] <= highs[i] for j in m)
        stats = np.asarray(stats_of(hyps, refs))
        summed = b.summed(stats)
        assert (summed.sum(0) == stats.sum(0)).all()
        for i, m in enumerate(members):  # a bucket's BLEU is sacreBLEU's on that bucket's sentences
            if m:
                subset = sorted(m)
                expected = BLEU().corpus_score([hyps[j] for j in subset], [[refs[j] for j in subset]]).score
                assert corpus_bleu(summed[i], {}) == pytest.approx(expected, abs=1e-9)


def test_bucket_edges_and_labels():
    assert buckets.parse_edges("8,12") == (8, 12)
    assert buckets.labels((8, 12)) == ["1-8", "9-12", "13+"]
    assert list(buckets.assign([0, 1, 8, 9, 12, 13, 40], (8, 12))) == [0, 0, 0, 1, 1, 2, 2]
    assert buckets.default_edges({"synthetic"}) == (8, 12)
    assert buckets.default_edges({"multi30k_de_en"}) == (8, 12, 16)
    assert buckets.default_edges({"wmt14_en_de"}) == buckets.default_edges({"custom"}) == (10, 20, 30, 40)
    # Rows of corpora with different defaults share one set of columns: the news-like one.
    assert buckets.default_edges({"synthetic", "multi30k_de_en"}) == (10, 20, 30, 40)
    assert buckets.default_edges(set()) == (10, 20, 30, 40)
    for bad in ("", "a,b", "12,8", "0,5", "5,5"):
        with pytest.raises(buckets.BucketError, match="--buckets"):
            buckets.parse_edges(bad)


def test_a_rows_statistics_import_one_way():
    """report/stats.py fills a table row's columns and knows a row by its attributes: it imports
    nothing of the module that builds the rows (which imports it)."""
    import ast
    from pathlib import Path

    import posenc.report.stats as row_stats
    tree = ast.parse(Path(row_stats.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "posenc.report.rows" not in imported and "posenc.report.table" not in imported
    assert {"posenc.stats.verdict", "posenc.stats"} <= imported


def test_a_comparison_is_typed_and_formatted_apart():
    from posenc.report.stats import Comparison
    baseline = Comparison(p_note="baseline")
    assert baseline.columns("test") == {"delta_bleu": None, "p_value": None, "delta_bleu_tested": None,
                                        "delta_chrf": None, "paired_seeds": 0, "p_note": "baseline"}
    tested = Comparison(delta_bleu=0.5, paired_seeds=3, delta_seeds=[1, 2, 3], delta_seeds_left_out=[],
                        delta_seeds_why="")
    columns = tested.columns("test_long")
    assert list(columns) == ["delta_bleu_test_long", "p_value_test_long", "delta_bleu_tested_test_long",
                             "delta_chrf_test_long", "paired_seeds_test_long", "p_note_test_long",
                             "delta_seeds_test_long", "delta_seeds_left_out_test_long", "delta_seeds_why_test_long"]
    assert columns["delta_bleu_test_long"] == 0.5 and columns["delta_seeds_test_long"] == [1, 2, 3]
