"""What a table says about the rows a sequential seeds design decided (issue 49): every column of a
stopped row over its stopping look's seeds, its secondary metrics as estimates with an interval and
no verdict, each interval labelled with its level, and no other primary or baseline than the
design's. A hand-made sweep (report_fixtures) with a seeds strategy's state beside it."""

import csv
import io
import statistics

import pytest

from posenc.cells.strategy import SeedsRow, SeedsSettings, SeedsState, StateCell
from posenc.cells.sweep import read_sweep
from posenc.report.render import render_reports
from posenc.report.rows import ReportError, Settings
from posenc.report.table import reports_of
from posenc.stats.sequential import Design, Look, repeated_ci
from report_fixtures import degrade, synthetic_test_sets, write_cell, write_plan, write_testset

RATES = {"both": 0.1, "source": 0.1, "none": 0.45}
SEEDS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Three placements, four seeds each, scored on test and test_long; records kept by cell."""
    root = tmp_path_factory.mktemp("seqrows")
    splits = synthetic_test_sets(test=60, test_long=30)
    corpus = write_testset(root / "cache", splits)
    sweep, records = root / "sweep", {}
    for placement, rate in RATES.items():
        for seed in SEEDS:
            hyps = {split: degrade(refs, rate, seed=seed * 7 + len(split)) for split, (_, refs) in splits.items()}
            records[(placement, seed)] = write_cell(sweep, f"placement={placement},seed={seed}", corpus, splits, hyps,
                                                    placement=placement, seed=seed)
    write_plan(sweep, {"placement": "both,source,none", "seed": "1,2,3,4"}, ["experiment=table4"])
    return sweep, records


def state(look_seeds=True, source=None):
    """none: looks at 3 and 4 seeds, stopped for efficacy at its first crossing, 3 (a retest); source
    going on after 4 (or ``source``, its row as given). The design's baseline: placement=both; the
    current design (the verdict's t, issue 38), as a new sweep runs it."""
    design = Design()
    level = design.alpha / 2
    threshold = design.thresholds(level)[3]
    first = Look(3, -25.0, 0.6, 2.0, 0.0009, threshold=threshold, cond_power=1.0, level=level)
    rows = [SeedsRow("placement=both", ["placement=both"], baseline=True, seeds=list(SEEDS)),
            SeedsRow("placement=none", ["placement=none"], seeds=list(SEEDS), stopped="efficacy",
                     why="efficacy at 3 seeds", verdict="worse", looks=[first, Look(4, -24.0, 0.5, 3.0, 0.001)],
                     ci=list(repeated_ci(first, threshold)), stop_n=3, level=level),
            source or SeedsRow("placement=source", ["placement=source"], seeds=list(SEEDS),
                               looks=[Look(3, 0.2, 0.6, 2.0, 0.75), Look(4, 0.1, 0.5, 3.0, 0.8)])]
    for r in rows[1:]:
        r.look_seeds = [[1, 2, 3], [1, 2, 3, 4]] if look_seeds else []
    settings = {"alpha": 0.05, "pilot_seeds": 3, "max_seeds": 10, "spending": "hsd", "gamma": -2.0, "futility": 0.1,
                "futility_from": 5, "statistic": "verdict", "effect": 1.0, "test_size": None,
                "baseline": "placement=both", "batch_seeds": 1}
    cells = [StateCell(f"placement={p},seed={s}", [f"placement={p}", f"seed={s}"]) for p in RATES for s in SEEDS]
    return SeedsState(SeedsSettings.of(settings), rows, cells)


def report_of(path, settings=Settings(), look_seeds=True, source=None):
    read = read_sweep(path)
    read.strategy = state(look_seeds, source)
    (report,) = reports_of([read], settings)
    return report


def row(report, placement):
    return next(r for r in report.rows if r.identity["placement"] == placement)


@pytest.mark.parametrize("look_seeds", [True, False], ids=["recorded", "state-before-issue-49"])
def test_a_stopped_rows_every_column_is_over_its_stopping_looks_seeds(sweep, look_seeds):
    """Item 4: none stopped at 3 seeds though it ran 4; its BLEU, chrF++, long split, sentence-only p
    and seeds are over seeds 1-3, as its Δ; seed 4 is named as left out. A state that predates the
    looks' seeds takes the first n paired seeds, as the look took them."""
    path, records = sweep
    report = report_of(path, look_seeds=look_seeds)
    none, source = row(report, "none"), row(report, "source")
    values = none.values
    bleus = [records[("none", s)]["bleu"] for s in (1, 2, 3)]
    assert values["bleu"] == pytest.approx(statistics.fmean(bleus)) and values["seeds_ok"] == 3
    assert values["bleu_sd"] == pytest.approx(statistics.stdev(bleus))
    long = [records[("none", s)]["bleu_test_long"] for s in (1, 2, 3)]
    assert values["bleu_test_long"] == pytest.approx(statistics.fmean(long))
    assert none.comparisons["test"].paired_seeds == 3 and none.comparisons["test_long"].delta_seeds == [1, 2, 3]
    assert values["sequential_seeds"] == [1, 2, 3] and values["sequential_seeds_left_out"] == [4]
    # A row still going on keeps every seed it ran; the baseline too.
    assert source.values["seeds_ok"] == 4 and row(report, "both").values["seeds_ok"] == 4
    text = render_reports([report])
    # Issue 60 item 4: seed 4 is reported as overrun, with Δ over every seed the row ran beside it.
    overrun = statistics.fmean(records[("none", s)]["bleu"] - records[("both", s)]["bleu"] for s in SEEDS)
    assert none.sequential.delta_with_overrun == pytest.approx(overrun)
    assert (f"every column over its stopping look's seeds 1, 2, 3; overrun: seed 4 ran after that look (a retest "
            f"stopped the row at an earlier one) and is in no decision, Δ, interval or column of the row; over every "
            f"seed it ran Δ is {overrun:+.2f}") in text
    table = next(t for t in text.split("\n\n") if "| overrun: seeds run after its stop |" in t)
    assert next(x for x in table.splitlines() if x.startswith("| placement=none |")).endswith("| 4 |")
    assert "a row's BLEU minus the baseline's need not equal its Δ" in text
    assert "Adopted:" not in text


def test_cells_adopted_at_the_first_launch_are_said_in_the_table(sweep):
    """Issue 49 item 6: a sweep that adopted the cells found in its directory says so, naming them."""
    from posenc.report.sequential import strategy_notes

    path, _ = sweep
    read = read_sweep(path)
    read.strategy = state()
    read.strategy.adopted = ["placement=both,seed=1", "placement=none,seed=1"]
    (report,) = reports_of([read], Settings())
    assert ("Adopted: 2 cells were in the sweep directory before the design launched them (hydra.sweeper.adopt=true): "
            "the first look of an open row after they were found took them as they were, and a row already stopped "
            "lists them as overrun: placement=both,seed=1, placement=none,seed=1.") \
        in strategy_notes(report)


def test_secondaries_of_a_sequential_row_are_estimates_with_an_interval_and_no_verdict(sweep):
    """Item 1: chrF++ and the long split of an adaptive row have Δ and a 95% interval, no verdict, no
    p and no *; a fixed grid's rows keep theirs."""
    path, _ = sweep
    report = report_of(path)
    none = row(report, "none")
    for key in (("chrf", "test"), ("bleu", "test_long"), ("chrf", "test_long")):
        v = none.verdicts[key]
        assert v.verdict.startswith("n/a: secondary of a sequential design, estimate only (no verdict); 95% CI [")
        assert v.p_seeds is None and v.p_seeds_holm is None and v.delta_ci_low < v.delta_ci_high
        assert v.delta_ci_level == pytest.approx(0.95)
    assert none.comparisons["test"].delta_chrf < 0
    line = next(x for x in render_reports([report]).splitlines() if x.startswith("| fconv_small") and "neither" in x)
    assert f"| {none.comparisons['test'].delta_chrf:+.2f} |" in line    # Δ chrF++ without *
    (fixed,) = reports_of([read_sweep(path)], Settings())
    assert row(fixed, "none").verdicts[("chrf", "test")].verdict == "worse"   # the same row in a fixed grid


def test_each_interval_says_its_level_and_the_csv_has_it(sweep):
    """Item 5: the repeated CI at α/2 is labelled 97.5% in the table's cell, its header says the
    levels differ, and the CSV's delta_ci_level holds each interval's coverage."""
    path, _ = sweep
    report = report_of(path)
    text = render_reports([report])
    header = next(x for x in text.splitlines() if x.startswith("| model"))
    assert "| Δ CI (95% or as marked) |" in header and "Δ 95% CI" not in header
    ci = row(report, "none").verdicts[("bleu", "test")]
    assert f"[{ci.delta_ci_low:+.2f}, {ci.delta_ci_high:+.2f}] (97.5%)" in text
    rows = {r["placement"]: r for r in csv.DictReader(io.StringIO(render_reports([report], "csv")))}
    assert float(rows["none"]["delta_ci_level"]) == pytest.approx(0.975)
    assert rows["source"]["delta_ci_level"] == "" and float(rows["none"]["delta_ci_level_chrf"]) == pytest.approx(0.95)
    fixed = render_reports(reports_of([read_sweep(path)], Settings()))
    assert "| Δ 95% CI |" in fixed and "(95%)" not in fixed


def test_another_primary_or_baseline_is_refused_on_a_sequential_sweep(sweep):
    """Items 1 and 5: the design tested BLEU on the test split against placement=both."""
    path, _ = sweep
    with pytest.raises(ReportError, match=r"^--primary chrf: .* allowed: --primary bleu$"):
        report_of(path, Settings(primary="chrf"))
    with pytest.raises(ReportError, match=r"^--baseline placement=source: .* against placement=both; allowed: "):
        report_of(path, Settings(baseline=("placement", "source")))
    assert report_of(path, Settings(baseline=("placement", "both"))).rows
    (fixed,) = reports_of([read_sweep(path)], Settings(primary="chrf", baseline=("placement", "source")))
    assert fixed.rows   # a fixed grid answers any question


def test_the_figure_labels_its_interval_with_its_level(sweep):
    """Item 5: the Δ figure's legend no longer calls every interval the verdict's 95% CI."""
    pytest.importorskip("matplotlib")
    from posenc.report.figures import delta_figure

    path, _ = sweep
    fig = delta_figure([report_of(path)])
    labels = [text.get_text() for ax in fig.axes if ax.get_legend() for text in ax.get_legend().get_texts()]
    assert "ours: Δ, verdict's CI (95%; a sequential row's: repeated, at its row's level)" in labels


def test_a_sequential_rows_sentence_only_p_is_not_shown(sweep):
    """Issue 60 item 4: sacreBLEU's sentence-only p is a fixed-sample p of the concatenated outputs
    of seeds the looks chose; a sequential row (stopped or going on) has none, on every split. A
    fixed grid's rows keep theirs."""
    path, _ = sweep
    report = report_of(path)
    for placement in ("none", "source"):
        assert [c.p_value for c in row(report, placement).comparisons.values()] == [None, None]
    rows = {r["placement"]: r for r in csv.DictReader(io.StringIO(render_reports([report], "csv")))}
    assert rows["none"]["p_value"] == rows["source"]["p_value"] == rows["none"]["p_value_test_long"] == ""
    text = render_reports([report])
    assert "p seeds (Holm) and p sentences only are empty" in text
    (fixed,) = reports_of([read_sweep(path)], Settings())
    assert all(c.p_value is not None for c in row(fixed, "none").comparisons.values())


def test_the_current_designs_pilot_stop_reports_its_stagewise_p(sweep):
    """Issue 60 item 4: none stopped at its pilot's look at α/2. Under the verdict's thresholds (a new
    sweep's design) its stage-wise p is the largest over the test-set shares (issue 49), not the
    look's own p, which only the seeds-only design of older sweeps reports at the pilot."""
    from posenc.stats.sequential import stagewise_p

    path, _ = sweep
    v = row(report_of(path), "none").verdicts[("bleu", "test")]
    expected = stagewise_p(Design(), 3, 0.0009, 0.025)
    assert v.p_seeds == pytest.approx(expected) and 0.0009 < expected <= 0.025
    read = read_sweep(path)
    read.strategy = state()
    older = Design(statistic="seeds")
    read.strategy.settings = SeedsSettings(older, 1.0, None, "placement=both", 1)
    (report,) = reports_of([read], Settings())
    assert row(report, "none").verdicts[("bleu", "test")].p_seeds == pytest.approx(0.0009)


def futility_at_4(level, ci_level=None):
    """source stopped for futility at 4 seeds, tested at ``level``: its interval as the state kept it
    (at ``level`` before issue 60; at ``ci_level`` since)."""
    look = Look(4, 0.4, 0.5, 3.0, 0.5, spread=0.8, shared=0.05, sentences=60, threshold=Design().thresholds(level)[4])
    kept = ci_level or level
    return SeedsRow("placement=source", ["placement=source"], seeds=list(SEEDS), stopped="futility",
                    why="futility at 4 seeds: ...", verdict="no evidence", looks=[Look(3, 0.2, 0.6, 2.0, 0.75), look],
                    ci=list(repeated_ci(look, Design().thresholds(kept)[4])), stop_n=4, level=level, ci_level=ci_level)


def test_an_interval_is_at_alpha_over_m_where_its_row_was_tested_at_a_level_passed_on(sweep):
    """Issue 60 item 1: once none rejected, source was tested at α; its interval is at α/2, the level
    its coverage holds at, labelled 97.5%, also where a state before issue 60 kept it at α. Its
    futility stop has a median-unbiased Δ (item 2) and no stage-wise p."""
    from posenc.report.sequential import strategy_table
    from posenc.stats.sequential import median_unbiased

    path, _ = sweep
    at_half = futility_at_4(0.05, ci_level=0.025)
    for source in (futility_at_4(0.05), at_half):
        report = report_of(path, source=source)
        v = row(report, "source").verdicts[("bleu", "test")]
        assert [v.delta_ci_low, v.delta_ci_high] == pytest.approx(at_half.ci) and v.delta_ci_level == 0.975
        assert v.p_seeds is None and row(report, "source").sequential.delta_median_unbiased == \
            pytest.approx(median_unbiased(Design(), source.looks[1], 0.05))
        text = render_reports([report])
        assert f"[{v.delta_ci_low:+.2f}, {v.delta_ci_high:+.2f}] (97.5%)" in text
        assert f"repeated 97.5% CI [{at_half.ci[0]:+.2f}, {at_half.ci[1]:+.2f}], tested at α 0.05" \
            in row(report, "source").sequential.stop
        body = strategy_table(report)[1]
        assert next(b for b in body if b[0] == "placement=source")[7:10] == \
            [f"[{at_half.ci[0]:+.2f}, {at_half.ci[1]:+.2f}] (97.5%)", "0.05", "-"]
    assert futility_at_4(0.05).ci != at_half.ci    # the interval a state before issue 60 kept: at α
