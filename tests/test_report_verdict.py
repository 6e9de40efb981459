"""The verdict over seeds and sentences, chrF++ and the power planning, on hand-made outputs, each
against a value computed independently here: sacreBLEU's API and command line, scipy's t and
noncentral t, a bootstrap, Holm's procedure by hand, and simulated sweeps whose truth is known."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from scipy import stats as scipy_stats

from posenc import metrics
from posenc.cells.record import Record, bleu_options
from posenc.metrics import TESTED_SACREBLEU, Scorer, chrf_signature_options, sacrebleu_version_problem
from posenc.metrics_vector import bleu, chrf
from posenc.report import cli
from posenc.report.outputs import score_output
from posenc.report.rows import Settings
from posenc.report.significance import paired_test
from posenc.report.table import table_rows
from posenc.stats import power as power_mod
from posenc.stats.simulate import NOISE, Pool, Setting, rejection_rate, resample_counts, simulate
from posenc.stats.verdict import holm, seed_test
from report_fixtures import masked, sweep_of, synthetic_test_sets, write_testset

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("verdict")
    splits = synthetic_test_sets(test=400, test_long=0)
    return root, splits, write_testset(root / "cache", splits)




def stats(hyps, refs, metric="bleu"):
    options = chrf_signature_options("") if metric == "chrf" else {}   # chrF++: word bigrams
    return np.asarray(Scorer().sentence_stats(hyps, refs, options, "k", metric))


def test_sacrebleu_is_the_version_its_private_pieces_were_tested_with():
    # posenc reads sacreBLEU's per-sentence statistics through private methods; pyproject.toml pins it.
    assert sacrebleu.__version__ == TESTED_SACREBLEU, sacrebleu_version_problem()
    assert sacrebleu_version_problem() == ""


def test_vectorized_bleu_and_chrf_are_sacrebleus(data):
    _, splits, _ = data
    refs = splits["test"][1]
    rng = np.random.default_rng(0)
    hyps = masked(refs, 0.4, 1)
    for options in ({}, {"smooth_method": "none"}, {"smooth_method": "floor", "smooth_value": 0.1},
                    {"smooth_method": "add-k", "smooth_value": 1.0}, {"effective_order": True}):
        s = np.asarray(Scorer().sentence_stats(hyps, refs, options, "k"))
        sums = np.stack([s[rng.integers(0, len(s), rng.integers(1, 4))].sum(0) for _ in range(200)] + [s.sum(0)])
        expected = [BLEU(**options)._compute_score_from_stats(list(x)).score for x in sums]
        assert bleu(sums, options) == pytest.approx(expected, abs=1e-9)
    c = stats(hyps, refs, "chrf")
    sums = np.stack([c[rng.integers(0, len(c), rng.integers(1, 4))].sum(0) for _ in range(200)] + [c.sum(0)])
    expected = [CHRF(word_order=2)._compute_score_from_stats(list(x)).score for x in sums]
    assert chrf(sums, chrf_signature_options("")) == pytest.approx(expected, abs=1e-9)


def test_test_set_variance_is_the_bootstraps(data):
    _, splits, _ = data
    refs = splits["test"][1]
    row = [stats(masked(refs, 0.2, s), refs) for s in (1, 2, 3)]
    base = [stats(masked(refs, 0.25, s + 10), refs) for s in (1, 2, 3)]
    test = seed_test(row, base, {})
    counts = resample_counts(len(refs), 4000, seed=7)
    boot = np.mean([bleu(counts @ r.astype(np.float32), {}) - bleu(counts @ b.astype(np.float32), {})
                    for r, b in zip(row, base)], 0)
    one = bleu(counts @ row[0].astype(np.float32), {}) - bleu(counts @ base[0].astype(np.float32), {})
    assert test.var_test == pytest.approx(boot.var(), rel=0.12)
    assert np.mean([test.var_test_seed]) == pytest.approx(one.var(), rel=0.25)




def test_identical_systems_give_no_evidence(data):
    root, splits, corpus = data
    refs = splits["test"][1]
    same = {s: masked(refs, 0.2, s) for s in (1, 2, 3)}
    rows = {r["placement"]: r for r in table_rows(sweep_of(root, "same", corpus, splits,
                                                           {"both": same, "none": dict(same)}))}
    none = rows["none"]
    assert none["verdict"] == "no evidence" and none["p_seeds"] >= 0.5 and none["p_seeds_holm"] >= 0.5
    assert none["delta_ci_low"] <= 0 <= none["delta_ci_high"] and none["verdict_chrf"] == "no evidence"
    assert rows["both"]["verdict"] == "n/a: baseline"


def test_every_seed_far_better_gives_better_with_the_hand_computed_delta(data):
    root, splits, corpus = data
    refs = splits["test"][1]
    base = {s: masked(refs, 0.4, s) for s in (1, 2, 3)}
    good = {s: masked(refs, 0.1, s + 20) for s in (1, 2, 3)}
    sweep = sweep_of(root, "far", corpus, splits, {"both": base, "source": good})
    rows = {r["placement"]: r for r in table_rows(sweep)}
    d = [BLEU().corpus_score(good[s], [refs]).score - BLEU().corpus_score(base[s], [refs]).score for s in (1, 2, 3)]
    source = rows["source"]
    assert source["verdict"] == "better" and source["verdict_chrf"] == "better"
    # The seeds' spread alone, with a normal's tails, is the most the test can say: the test-set part
    # only widens se, and any t's tails are heavier.
    z_alone = 2 * scipy_stats.norm.sf(np.mean(d) / (np.std(d, ddof=1) / math.sqrt(3)))
    assert z_alone <= source["p_seeds"] < 0.05 and source["delta_ci_low"] > 0
    assert source["delta_ci_low"] < np.mean(d) < source["delta_ci_high"]
    expected_chrf = np.mean([CHRF(word_order=2).corpus_score(good[s], [refs]).score
                             - CHRF(word_order=2).corpus_score(base[s], [refs]).score for s in (1, 2, 3)])
    assert source["delta_chrf"] == pytest.approx(expected_chrf, abs=1e-9)


def test_seeds_that_disagree_fool_the_sentence_test_but_not_the_verdict(tmp_path):
    """Seed 1 +5 BLEU, seed 2 -5, seed 3 the same output: every difference is made of many one-word
    changes, so the sentence noise is tiny, and sacreBLEU's test over the concatenated outputs is sure
    of the small difference that is left (BLEU of a concatenation is not the mean of the seeds'
    BLEU); over seeds there is no evidence."""
    splits = synthetic_test_sets(test=1200, test_long=0)
    corpus = write_testset(tmp_path / "cache", splits, key="12" * 32)
    refs = splits["test"][1]
    base = {1: masked(refs, 0.1, 1), 2: masked(refs, 0.4, 2), 3: masked(refs, 0.25, 3)}
    row = {1: masked(refs, 0.07488, 1), 2: masked(refs, 0.43893, 2), 3: list(base[3])}  # rates for +5 and -5
    d = [BLEU().corpus_score(row[s], [refs]).score - BLEU().corpus_score(base[s], [refs]).score for s in (1, 2, 3)]
    assert d[0] == pytest.approx(5, abs=0.1) and d[1] == pytest.approx(-5, abs=0.1) and d[2] == 0
    joined = lambda out: [h for s in (1, 2, 3) for h in out[s]]  # noqa: E731
    refs3 = refs * 3
    _, results, _ = paired_test((joined(base), stats(joined(base), refs3).tolist()),
                                {"row": (joined(row), stats(joined(row), refs3).tolist())}, {}, "bs", 1000)
    assert results["row"].p_value < 0.05
    target = {r["placement"]: r for r in table_rows(sweep_of(tmp_path, "disagree", corpus, splits,
                                                             {"both": base, "target": row}))}["target"]
    assert target["p_value"] == pytest.approx(results["row"].p_value)   # the table's sentence-only column
    assert target["verdict"] == "no evidence" and target["p_seeds"] > 0.5


def test_holm_matches_a_hand_worked_example(data):
    # p = 0.01, 0.04, 0.03 over m = 3: sorted 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> max(0.06, 0.04).
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert holm({"a": 0.5}) == {"a": 0.5} and holm({"a": 0.6, "b": 0.7}) == pytest.approx({"a": 1.0, "b": 1.0})
    root, splits, corpus = data
    refs = splits["test"][1]
    outputs = {"both": {s: masked(refs, 0.3, s) for s in (1, 2, 3)}}
    for placement, rate in (("source", 0.28), ("target", 0.2), ("none", 0.31)):
        outputs[placement] = {s: masked(refs, rate, s + 40) for s in (1, 2, 3)}
    rows = [r for r in table_rows(sweep_of(root, "holm", corpus, splits, outputs)) if r["placement"] != "both"]
    ordered = sorted(rows, key=lambda r: r["p_seeds"])
    running = 0
    for i, r in enumerate(ordered):
        running = max(running, min(1, (3 - i) * r["p_seeds"]))
        assert r["p_seeds_holm"] == pytest.approx(running)
        assert (r["verdict"] != "no evidence") == (running < 0.05)


def test_chrf_is_the_sacrebleu_command_line(data, tmp_path):
    root, splits, corpus = data
    refs = splits["test"][1]
    hyps = masked(refs, 0.3, 5)
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    (tmp_path / "hyp.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    out = subprocess.run([str(BIN / "sacrebleu"), str(tmp_path / "ref.txt"), "-i", str(tmp_path / "hyp.txt"),
                          "-m", "chrf", "--chrf-word-order", "2", "-f", "json", "-w", "6"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    score, signature = metrics.chrf().corpus_score(hyps, refs)
    assert score == pytest.approx(expected["score"], abs=1e-6) and expected["name"] == "chrF2++"
    assert "nw:2" in signature
    # An old record without chrf: the table computes it from the hypotheses
    sweep = sweep_of(root, "chrf", corpus, splits, {"both": {1: hyps}})
    assert table_rows(sweep)[0]["chrf"] == pytest.approx(expected["score"], abs=1e-6)


@pytest.fixture(scope="module")
def pool(data):
    _, splits, _ = data
    return Pool.build(splits["test"][1], np.round(np.linspace(0, 0.7, 15), 3), draws=2, seed=3)


@pytest.mark.parametrize("noise", list(NOISE))
def test_null_calibration_keeps_the_false_positive_rate(pool, noise):
    """A small version of scripts/calibrate_significance.py: 2,000 sweeps of 3 seeds whose rows cannot
    differ, seeds spread several BLEU. Today's star fires often; the verdict stays at about 5%: the
    bound fails a true rate of 0.07 (binomial sd 0.0057 at 2,000: 0.065 is 0.9 sd below it) and
    passes 0.05 (2.6 sd above it)."""
    result = simulate(pool, Setting(3, 400, 3.0, 0.0, noise), 2000, seed=11, star_comparisons=60)
    assert rejection_rate(result["p"]) <= 0.065
    assert rejection_rate(result["p_star"]) >= 0.3
    covered = np.mean((result["ci_low"] <= 0) & (0 <= result["ci_high"]))
    assert covered >= 0.935


def test_power_is_the_noncentral_t_where_the_seeds_alone_vary():
    # No test-set part shared by the seeds: the test is the paired t, whose power scipy's nct gives.
    comps = power_mod.Components(spread_var=1.5 ** 2 + 0.5 ** 2, sentence_var=0.5 ** 2, shared_var=0.0, sentences=1000)
    for seeds, effect in ((3, 2.0), (5, 1.0), (10, 1.0), (20, 0.5)):
        se = math.sqrt((1.5 ** 2 + 0.5 ** 2) / seeds)
        crit = scipy_stats.t.ppf(0.975, seeds - 1)
        expected = scipy_stats.nct.sf(crit, seeds - 1, effect / se) + scipy_stats.nct.cdf(-crit, seeds - 1, effect / se)
        assert power_mod.power(effect, seeds, comps) == pytest.approx(expected, abs=0.01)
    assert power_mod.power(power_mod.mde(5, comps), 5, comps) == pytest.approx(0.8, abs=1e-6)
    needed = power_mod.seeds_needed(0.5, comps)
    assert power_mod.power(0.5, needed, comps) >= 0.8 > power_mod.power(0.5, needed - 1, comps)
    # More test sentences shrink the sentence parts only: with no seed part, 4x the sentences halve mde
    # (to within what the shared part's degrees of freedom, 499 against 1999, change in the t).
    flat = power_mod.Components(0.4, 0.4, 0.1, 500)
    assert power_mod.mde(5, flat, 2000) == pytest.approx(power_mod.mde(5, flat) / 2, rel=2e-3)


def test_mde_and_seeds_needed_agree_with_the_simulation(pool):
    """Components from a pilot of many simulated sweeps, then the simulated power at the predicted
    mde (3 seeds) and at the predicted seeds for 2 BLEU: 0.8 ± 0.1."""
    pilot = simulate(pool, Setting(8, 400, 1.5, 0.0, "independent"), 120, seed=21)
    from posenc.stats.verdict import SeedTest
    comps = power_mod.Components.of(SeedTest(0, 0, 0, 0, 0, 8, float(np.sqrt(np.mean(pilot["sd_diff"] ** 2))),
                                             float(np.mean(pilot["var_test"])), float(np.mean(pilot["var_test_seed"])),
                                             400))
    mde3 = power_mod.mde(3, comps)
    at_mde = simulate(pool, Setting(3, 400, 1.5, mde3, "independent"), 600, seed=22)
    assert 0.7 <= rejection_rate(at_mde["p"]) <= 0.9, mde3
    needed = power_mod.seeds_needed(2.0, comps)
    assert 3 <= needed <= 25
    at_needed = simulate(pool, Setting(needed, 400, 1.5, 2.0, "independent"), 600, seed=23)
    assert 0.7 <= rejection_rate(at_needed["p"]) <= 0.9, needed


def test_power_columns_and_options(data, capsys):
    root, splits, corpus = data
    refs = splits["test"][1]
    sweep = sweep_of(root, "power", corpus, splits, {"both": {s: masked(refs, 0.3, s) for s in (1, 2, 3)},
                                                     "none": {s: masked(refs, 0.3, s + 9) for s in (1, 2, 3)}})
    rows = {r["placement"]: r for r in table_rows(sweep, Settings(power=True, effect=0.5, test_size=3003))}
    assert rows["none"]["mde_bleu"] > 0 and rows["both"]["mde_bleu"] is None
    needed = rows["none"]["seeds_needed"]
    assert isinstance(needed, int) or needed.startswith((">", "n/a: not with this many test sentences"))
    assert "mde_bleu" not in table_rows(sweep)[1]
    assert cli.main([str(sweep), "--power", "--test-size", "3003", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert {"mde_bleu", "seeds_needed", "p_seeds", "p_seeds_holm", "delta_ci_low", "delta_ci_high", "verdict", "chrf",
            "delta_chrf", "verdict_chrf", "p_value"} <= set(header)
    assert cli.main([str(sweep), "--power"]) == 0
    out = capsys.readouterr().out
    assert "Power planning" in out and "mde BLEU" in out
    for args, message in ((["--effect", "1"], "need --power"), (["--power", "--effect", "0"], "--effect 0"),
                          (["--power", "--test-size", "-3"], "--test-size -3")):
        assert cli.main([str(sweep), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_statistics_cached_when_a_cell_is_scored_are_the_tables(data):
    """The harness caches each output's statistics as it scores it; the table then finds them
    under the same key (nothing extracted again, nothing added) and gives the same row."""
    root, splits, corpus = data
    refs = splits["test"][1]
    sweep = sweep_of(root, "scored", corpus, splits, {"both": {1: masked(refs, 0.2, 1)}})
    cell = sweep / "placement=both,seed=1"
    record = json.loads((cell / "result.json").read_text())
    hyps = (cell / "hypotheses.txt").read_text().splitlines()
    scores = score_output(cell, "hypotheses.txt", hyps, refs, corpus["cache_key"], "test", False, hyps, refs)
    assert scores["bleu_options"] == bleu_options(Record.from_dict(record)) and scores["bleu"] == record["bleu"]
    cached = sorted(p.name for p in (cell / ".report-cache").iterdir())
    assert len(cached) == 2
    row = table_rows(sweep)[0]
    assert sorted(p.name for p in (cell / ".report-cache").iterdir()) == cached
    assert row["chrf"] == pytest.approx(CHRF(word_order=2).corpus_score(hyps, [refs]).score)
