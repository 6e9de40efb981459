"""The seeds strategy's planner with no Hydra: which cells it asks for, the looks it takes, the
group sequential design's decisions (``posenc.stats.sequential``) as it applies them to a sweep's
rows, its state written and read back, and its refusals. The looks are the verdict's own tests
(``verdict.SeedTest``), built here from chosen Δ and spreads with the test's own formulas."""

import json
import math
import re
from dataclasses import replace

import pytest
from scipy import stats as scipy_stats

from posenc.cells.strategy import SeedsState, StateError, read_state, write_state
from posenc.harness.sweep.config import seeds_settings
from posenc.harness.sweep.planner import SeedsPlanner, SeedsSettings, StrategyError, settings_problem
from posenc.stats import sequential
from posenc.stats.verdict import SeedTest, p_values

JOBS = [["placement=both"], ["placement=source"], ["placement=none"]]
SENTENCES = 500


def name(overrides) -> str:
    return ",".join(sorted(overrides))


def settings(**given) -> SeedsSettings:
    return SeedsSettings.of(seeds_settings({"effect": 1.0, **given}))


def planner(jobs=JOBS, before=None, **given) -> SeedsPlanner:
    return SeedsPlanner.for_grid(settings(**given), jobs, name, before)


def seed_test(delta: float, n: int, sd: float = 1.0, shared: float = 0.01) -> SeedTest:
    """The verdict's test of a row whose n seeds' differences have sd ``sd`` and whose test set's
    shared sampling has variance ``shared`` (no sentence noise that differs between seeds)."""
    p, se, df = (float(x) for x in p_values(delta, sd, shared, shared, n, SENTENCES))
    return SeedTest(delta, se, p, math.nan, math.nan, n, sd, shared, shared, SENTENCES, df)


def finish(plan: SeedsPlanner, seeds: dict) -> None:
    """Mark these seeds of each row (by label) finished, as next_batch would read them."""
    for row in plan.rows:
        row.state.seeds = sorted(set(row.state.seeds) | set(seeds.get(row.label, ())))


def step(plan: SeedsPlanner, tests: dict) -> list:
    """One step of next_batch without reading a sweep: the looks at ``tests`` (by label), then the batch."""
    plan.look({id(r): tests[r.label] for r in plan.rows if r.label in tests})
    return sorted((row.label, seed) for row, seed in plan.wanted())


def rows(plan):
    return {r.label: r for r in plan.rows}


def test_the_pilot_comes_first_for_every_row_and_its_baseline():
    plan = planner()
    assert step(plan, {}) == [(p, s) for p in ("placement=both", "placement=none", "placement=source")
                              for s in (1, 2, 3)]
    assert [r.base.label if r.base else None for r in plan.rows] == [None, "placement=both", "placement=both"]


def test_an_obvious_effect_stops_at_the_pilot_on_the_alpha_over_m_table_with_its_repeated_ci():
    plan = planner(batch_seeds=2)
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    worse, nothing = seed_test(-25.0, 3, sd=1.0), seed_test(0.1, 3, sd=1.0)
    batch = step(plan, {"placement=none": worse, "placement=source": nothing})
    none = rows(plan)["placement=none"].state
    design = sequential.Design()
    threshold = design.thresholds(design.alpha / 2)[3]   # two rows share the baseline: α/2 while none rejected
    assert worse.p <= threshold
    assert (none.stopped, none.why, none.verdict) == (sequential.EFFICACY, "efficacy at 3 seeds", "worse")
    assert none.level == pytest.approx(design.alpha / 2)
    half = scipy_stats.t.ppf(1 - threshold / 2, worse.df) * worse.se   # Δ ± the boundary's t·se
    assert none.ci == pytest.approx([worse.delta - half, worse.delta + half])
    assert none.looks[-1].threshold == pytest.approx(threshold) and none.looks[-1].n == 3
    # source goes on with batch_seeds (2 here) more, and the baseline runs them too; none gets nothing.
    assert batch == [("placement=both", 4), ("placement=both", 5), ("placement=source", 4), ("placement=source", 5)]


def test_a_rejection_passes_its_alpha_to_the_open_row_which_is_retested_at_its_looks():
    design = sequential.Design()
    split, whole = design.thresholds(design.alpha / 2)[3], design.thresholds(design.alpha)[3]
    # A Δ whose p lies between a(3) at α/2 and a(3) at α: not rejected alone, rejected once the other row's α moves.
    delta = next(d / 100 for d in range(100, 3000) if split < seed_test(d / 100, 3).p <= whole)
    assert split < seed_test(delta, 3).p <= whole
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": seed_test(-25.0, 3), "placement=source": seed_test(delta, 3)})
    source = rows(plan)["placement=source"].state
    assert (source.stopped, source.verdict) == (sequential.EFFICACY, "better")
    assert source.level == pytest.approx(design.alpha)
    # The same look without the other row's rejection: it goes on.
    alone = planner()
    step(alone, {})
    finish(alone, {label: (1, 2, 3) for label in rows(alone)})
    step(alone, {"placement=none": seed_test(0.0, 3), "placement=source": seed_test(delta, 3)})
    assert rows(alone)["placement=source"].state.stopped == ""


def test_a_rerun_relabels_a_state_before_issue_60s_passed_on_interval_at_alpha_over_m():
    """A state written before issue 60 kept the retested row's interval at the α passed on to it;
    resumed, the row's interval is at α/2 (its family's level before any row rejected), its
    verdict and level unchanged."""
    design = sequential.Design()
    split, whole = design.thresholds(design.alpha / 2)[3], design.thresholds(design.alpha)[3]
    delta = next(d / 100 for d in range(100, 3000) if split < seed_test(d / 100, 3).p <= whole)
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": seed_test(-25.0, 3), "placement=source": seed_test(delta, 3)})
    kept = plan.state()
    source = next(r for r in kept.rows if r.row == "placement=source")
    look = source.stop_look()
    assert source.ci == pytest.approx(sequential.repeated_ci(look, split)) and source.ci_level == 0.025
    old = replace(source, ci=list(sequential.repeated_ci(look, whole)), ci_level=None)   # as issue 49 kept it
    before = SeedsState(kept.settings, [old if r is source else r for r in kept.rows], kept.cells, design=kept.design)
    again = rows(planner(before=before))["placement=source"].state
    assert again.ci == pytest.approx(source.ci) and again.ci_level == 0.025
    assert (again.stopped, again.verdict, again.level) == (source.stopped, source.verdict, source.level)


def test_a_row_that_cannot_find_the_effect_stops_for_futility_and_one_that_runs_on_stops_at_max_seeds():
    plan = planner(jobs=[["placement=both"], ["placement=none"]], max_seeds=7, batch_seeds=2)
    step(plan, {})
    for n in (3, 5):
        finish(plan, {"placement=both": range(1, n + 1), "placement=none": range(1, n + 1)})
        step(plan, {"placement=none": seed_test(0.0, n, sd=0.3)})
    none = rows(plan)["placement=none"].state
    look = sequential.Look.of(seed_test(0.0, 5, sd=0.3))
    assert sequential.conditional_power(look, plan.settings.design, 1.0) < 0.10   # the design's own formula
    assert (none.stopped, none.verdict) == (sequential.FUTILITY, "no evidence")
    assert none.why.startswith("futility at 5 seeds: conditional power ")
    assert [x.n for x in none.looks] == [3, 5]
    # A row whose Δ is near the effect goes on to max_seeds and stops there, "no evidence" if never crossed.
    plan = planner(jobs=[["placement=both"], ["placement=none"]], max_seeds=5, batch_seeds=2, futility=0.01)
    step(plan, {})
    for n in (3, 5):
        finish(plan, {"placement=both": range(1, n + 1), "placement=none": range(1, n + 1)})
        assert step(plan, {"placement=none": seed_test(0.5, n, sd=1.0)}) == ([] if n == 5 else [
            ("placement=both", 4), ("placement=both", 5), ("placement=none", 4), ("placement=none", 5)])
    none = rows(plan)["placement=none"].state
    assert (none.stopped, none.why, none.verdict) == (sequential.MAX, "max_seeds", "no evidence")
    assert rows(plan)["placement=both"].state.stopped == "baseline"   # no row runs on against it


def test_a_rerun_from_the_state_takes_no_look_twice_and_the_same_decisions(tmp_path):
    plan = planner(batch_seeds=2)
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": seed_test(-25.0, 3), "placement=source": seed_test(0.3, 3)})
    write_state(tmp_path, plan.state())
    before = read_state(tmp_path)
    assert isinstance(before, SeedsState) and not before.old_rule
    again = planner(before=before, batch_seeds=2)
    finish(again, {label: (1, 2, 3) for label in rows(again)})
    # The same seeds: no new look (even if the report's test came out otherwise), the same batch.
    assert step(again, {"placement=none": seed_test(0.0, 3), "placement=source": seed_test(9.0, 3)}) == [
        ("placement=both", 4), ("placement=both", 5), ("placement=source", 4), ("placement=source", 5)]
    assert [r.state for r in again.rows] == [r.state for r in plan.rows]
    assert json.loads(json.dumps(again.state().to_json())) == json.loads(json.dumps(plan.state().to_json()))


@pytest.mark.parametrize("given,message", [
    ({"max_seeds": 12}, "hydra.sweeper.max_seeds=12 differs from 10, with which this sweep started (its thresholds "
                        "depend on it); allowed: max_seeds=10, or a new hydra.sweep.dir"),
    ({"gamma": -3.0}, "hydra.sweeper.gamma=-3.0 differs from -2.0"),
])
def test_a_rerun_with_another_design_is_refused(tmp_path, given, message):
    plan = planner()
    step(plan, {})
    write_state(tmp_path, plan.state())
    with pytest.raises(StrategyError) as err:
        planner(before=read_state(tmp_path), **given)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_state_from_before_the_verdicts_thresholds_resumes_only_as_it_started(tmp_path):
    """A state without a statistic ran the seeds-only table: the default (the verdict's t) is refused
    in one line that says so, with the state untouched; statistic=seeds resumes it as it started."""
    plan = planner()   # its pilot's batch: the same whatever the table
    step(plan, {})
    state = plan.state().to_json()
    del state["settings"]["statistic"], state["design_hash"]  # as such a state was written: no hash either
    (tmp_path / SeedsState.FILE).write_text(json.dumps(state))
    written = (tmp_path / SeedsState.FILE).read_bytes()
    with pytest.raises(StrategyError) as err:
        planner(before=read_state(tmp_path))
    assert str(err.value) == ("hydra.sweeper.statistic='verdict' differs from 'seeds', with which this sweep started "
                              "(the seeds-only t's table of the sweeps started before 2026-12-03) (its thresholds "
                              "depend on it); allowed: statistic='seeds', or a new hydra.sweep.dir")
    assert (tmp_path / SeedsState.FILE).read_bytes() == written
    again = planner(before=read_state(tmp_path), statistic="seeds")
    assert [r.state for r in again.rows] == [r.state for r in plan.rows]


def test_an_old_rules_state_still_reads_says_so_and_is_not_continued(tmp_path):
    old = {"strategy": "seeds", "settings": {"effect": 0.5, "test_size": None, "baseline": "placement=both",
                                             "pilot_seeds": 3, "max_seeds": 10, "batch_seeds": 2, "min_seeds": 7},
           "rows": [{"row": "placement=none", "overrides": ["placement=none"], "baseline": False, "seeds": [1, 2, 3],
                     "planned": 12, "stopped": "max_seeds", "why": "stopped at max_seeds=10; the plan books 12"}],
           "cells": [{"dirname": "placement=none,seed=1", "overrides": ["placement=none", "seed=1"]}]}
    (tmp_path / SeedsState.FILE).write_text(json.dumps(old))
    state = read_state(tmp_path)
    assert state.old_rule and state.rows[0].planned == 12 and state.rows[0].looks == []
    with pytest.raises(StrategyError, match="started by the seeds strategy's old rule"):
        planner(before=state)


@pytest.mark.parametrize("given,message", [
    ({"gamma": 11}, "gamma=11 is not allowed; allowed: -10 to 10"),
    ({"spending": "linear"}, "spending='linear' is not allowed; allowed: hsd, obf, pocock"),
    ({"futility": 1.0}, "futility=1.0 is not allowed; allowed: 0 < futility < 1"),
    ({"futility": 0}, "futility=0 is not allowed; allowed: 0 < futility < 1"),
    ({"pilot_seeds": 1}, "pilot_seeds=1 is not allowed; allowed: 2 or more"),
    ({"batch_seeds": 0}, "batch_seeds=0 is not allowed; allowed: a whole number >= 1"),
    ({"effect": 0}, "effect=0 is not allowed; allowed: a BLEU difference > 0"),
    ({"test_size": 0}, "test_size=0 is not allowed"),
])
def test_bad_settings_are_one_line_naming_the_value(given, message):
    problem = settings_problem(settings(**given))
    assert problem.startswith(message) and "\n" not in problem


def test_the_defaults_live_in_the_design_and_the_structured_config():
    from posenc.harness.sweep.config import SeedsStrategyConf

    conf, design = SeedsStrategyConf(), sequential.Design()
    for key in ("alpha", "pilot_seeds", "max_seeds", "spending", "gamma", "futility", "futility_from"):
        assert getattr(conf, key) == getattr(design, key)
    assert settings_problem(settings()) == "" and settings().design == design


def test_a_test_set_that_caps_the_power_is_said_after_the_pilot_before_more_seeds():
    """Where the test set's shared sampling alone has sd 1 BLEU, no number of seeds finds |Δ| = 1
    with 80% power: the final look at N seeds has power at most about Φ(1 - 1.96) + ... = 0.17."""
    plan = planner(jobs=[["placement=both"], ["placement=none"]])
    step(plan, {})
    finish(plan, {"placement=both": (1, 2, 3), "placement=none": (1, 2, 3)})
    batch = step(plan, {"placement=none": seed_test(0.5, 3, sd=0.5, shared=1.0)})
    none = rows(plan)["placement=none"].state
    assert none.unreachable.startswith("cannot reach 80% power at |Δ| = 1: at most 0.")
    best = float(none.unreachable.split("at most ")[1].split()[0])
    z = scipy_stats.norm.ppf(1 - 0.05 / 2)
    assert best <= scipy_stats.norm.cdf(1 / math.sqrt(1 + 0.25 / 10) - z) + 0.05   # the normal bound, t aside
    assert batch and none.stopped == ""           # it is said, and the row goes on: the user decides
    fine = planner(jobs=[["placement=both"], ["placement=none"]])
    step(fine, {})
    finish(fine, {"placement=both": (1, 2, 3), "placement=none": (1, 2, 3)})
    step(fine, {"placement=none": seed_test(0.5, 3, sd=0.5, shared=0.0001)})
    assert rows(fine)["placement=none"].state.unreachable == ""


def test_one_function_names_rows_and_finds_their_baselines_for_the_sweepers_and_the_report():
    from types import SimpleNamespace

    from posenc.cells.rows import baseline_of, row_name, varying
    from posenc.report.rows import baselines

    grid = [{"model": "a", "placement": "both"}, {"model": "a", "placement": "none"},
            {"model": "b", "placement": "none"}, {"model": "b", "placement": "both"},
            {"model": "c", "placement": "none"}]
    assert baseline_of(grid, "placement", "both") == [0, 0, 3, 3, None]
    assert varying(grid) == ["model", "placement"] and varying(grid[:2]) == ["placement"]
    assert row_name(grid[1], varying(grid[:2])) == "placement=none" and row_name({}, []) == "the one row"
    # The report's rows and the planner's rows find the same baselines.
    report_rows = [SimpleNamespace(identity=values) for values in grid]
    found = baselines(report_rows, ("placement", "both"))
    index = [None if found[id(r)] is None else report_rows.index(found[id(r)]) for r in report_rows]
    assert index == [0, 0, 3, 3, None]
    plan = planner(jobs=[[f"model={v['model']}", f"placement={v['placement']}"] for v in grid])
    assert [r.base and plan.rows.index(r.base) for r in plan.rows] == [None, 0, 3, None, None]
    assert [r.label for r in plan.rows][:2] == ["model=a,placement=both", "model=a,placement=none"]


def test_a_family_whose_rows_all_stopped_is_left_as_it_is():
    """Every row of the family rejected: a rerun has nothing to decide, and says so by an empty batch."""
    plan = planner(jobs=[["placement=both"], ["placement=none"]])
    step(plan, {})
    finish(plan, {"placement=both": (1, 2, 3), "placement=none": (1, 2, 3)})
    assert step(plan, {"placement=none": seed_test(-25.0, 3)}) == []
    before = plan.state()
    assert step(plan, {"placement=none": seed_test(-25.0, 3)}) == [] and plan.state() == before


def test_by_default_a_row_still_open_gets_one_seed_per_look():
    """batch_seeds defaults to 1, the design the thresholds are computed for (a look at every n)."""
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    batch = step(plan, {"placement=none": seed_test(0.3, 3), "placement=source": seed_test(0.3, 3)})
    assert batch == [("placement=both", 4), ("placement=none", 4), ("placement=source", 4)]


FAMILY_ENDS = ("the rows, the baseline and the planned effect were fixed when this sweep's pilot started (Holm's "
               "α/m and every look rest on them); allowed: the same command, or a new hydra.sweep.dir")


@pytest.mark.parametrize("jobs,given,change", [
    (JOBS[:2], {}, "row placement=none dropped"),
    (JOBS + [["placement=target"]], {}, "row placement=target added"),
    (JOBS, {"baseline": "placement=source"}, "hydra.sweeper.baseline=placement=source differs from placement=both"),
    (JOBS, {"effect": 2.0}, "hydra.sweeper.effect=2 differs from 1"),
])
def test_a_rerun_that_changes_the_family_is_refused_in_one_line_and_the_state_is_untouched(tmp_path, jobs, given,
                                                                                           change):
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": seed_test(-25.0, 3), "placement=source": seed_test(0.3, 3)})
    write_state(tmp_path, plan.state())
    written = (tmp_path / SeedsState.FILE).read_bytes()
    with pytest.raises(StrategyError) as err:
        planner(jobs=jobs, before=read_state(tmp_path), **given)
    assert str(err.value) == f"{change}: {FAMILY_ENDS}"
    assert (tmp_path / SeedsState.FILE).read_bytes() == written
    # The same family resumes, its rows' looks and decisions as they were.
    again = planner(before=read_state(tmp_path))
    assert [r.state for r in again.rows] == [r.state for r in plan.rows]


def test_a_row_whose_overrides_changed_under_the_same_label_is_refused():
    plan = planner()
    step(plan, {})
    before = plan.state()
    before.rows[2].overrides = ["placement=none", "model=fconv_iwslt_de_en"]
    with pytest.raises(StrategyError, match=r"^row placement=none's overrides changed from placement=none "
                                            r"model=fconv_iwslt_de_en to placement=none: "):
        planner(before=before)


def test_an_efficacy_stop_by_a_retest_at_an_earlier_look_keeps_that_look_for_its_delta_ci_and_seeds():
    """source's look at 4 crosses a(4) at α only, its look at 5 crosses nothing; once none rejects at
    5, source is retested at α and stops at 4: the state, its frozen decision and the table's words
    all come from the look at 4."""
    from posenc.report.sequential import row_stop

    design = sequential.Design()
    whole, split = design.thresholds(design.alpha), design.thresholds(design.alpha / 2)
    at4 = next(seed_test(d / 100, 4) for d in range(50, 3000) if split[4] < seed_test(d / 100, 4).p <= whole[4])
    at5 = seed_test(0.2, 5)
    plan = planner()
    step(plan, {})
    for n, tests in ((3, {"placement=none": seed_test(0.1, 3), "placement=source": seed_test(0.2, 3)}),
                     (4, {"placement=none": seed_test(0.1, 4), "placement=source": at4}),
                     (5, {"placement=none": seed_test(-25.0, 5), "placement=source": at5})):
        finish(plan, {label: range(1, n + 1) for label in rows(plan)})
        step(plan, tests)
    source = rows(plan)["placement=source"].state
    assert (source.stopped, source.why, source.verdict, source.stop_n) == (sequential.EFFICACY, "efficacy at 4 seeds",
                                                                           "better", 4)
    assert [x.n for x in source.looks] == [3, 4, 5]
    # Each look's paired seeds are kept: the table's columns of this row are over the look at 4's (issue 49).
    assert source.look_seeds == [[1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]
    judged = source.stop_look()
    assert judged.delta == at4.delta and judged.threshold == pytest.approx(whole[4])
    # Its verdict is α's, passed on; its interval is at α/2, the level fixed before the pilot (issue 60).
    half = scipy_stats.t.ppf(1 - split[4] / 2, at4.df) * at4.se
    assert source.ci == pytest.approx([at4.delta - half, at4.delta + half])
    assert (source.level, source.ci_level) == (pytest.approx(0.05), pytest.approx(0.025))
    text = row_stop(source)
    assert text.startswith(f"efficacy at 4 seeds: better, Δ {at4.delta:+.2f}, repeated 97.5% CI") \
        and f"{at5.delta:+.2f}" not in text and text.endswith(", tested at α 0.05")
    from posenc.harness.sweep.planner import decision_of
    assert decision_of(source).look.n == 4
    from posenc.harness.sweep.summary import strategy_summary  # the sweep's last line says the same
    assert f"placement=source 5 seeds (efficacy at 4 seeds: better, Δ {at4.delta:+.2f}, repeated 97.5% CI" \
        in strategy_summary(plan.state())


def test_a_row_stopped_untestable_is_frozen_as_a_non_rejection_and_passes_no_alpha_on():
    """A row stopped untestable keeps its share, whatever its stored looks say: the other row is
    still tested at α/2, never at the α a rejection would pass on."""
    from posenc.harness.sweep.planner import decision_of

    design = sequential.Design()
    whole, split = design.thresholds(design.alpha), design.thresholds(design.alpha / 2)
    at4 = next(seed_test(d / 100, 4) for d in range(50, 3000) if split[4] < seed_test(d / 100, 4).p <= whole[4])
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": seed_test(0.0, 3), "placement=source": seed_test(0.1, 3)})
    none, source = rows(plan)["placement=none"].state, rows(plan)["placement=source"].state
    none.looks[-1] = replace(none.looks[-1], p=1e-9)   # a stored look that would cross at α/2 if it were retested
    finish(plan, {label: (1, 2, 3, 4) for label in rows(plan)})
    step(plan, {"placement=none": "its cells have no outputs", "placement=source": at4})
    assert (none.stopped, none.why) == ("untestable", "its cells have no outputs")
    assert decision_of(none).verdict == "no evidence" and decision_of(none).stopped == "untestable"
    assert source.stopped == "" and source.looks[-1].level == pytest.approx(design.alpha / 2)


def test_the_unreachable_warning_is_at_the_rows_level():
    """Power at α/2 (two rows) below 80% while at α above it: the warning names α/2."""
    from posenc.harness.sweep.planner import unreachable

    design = sequential.Design()
    test = next(seed_test(0.5, 3, sd=s / 100, shared=0.01) for s in range(5, 200)
                if sequential.sequential_power(design, 1.0, (s / 100) ** 2, 0.01, SENTENCES, design.alpha) >= 0.8
                > sequential.sequential_power(design, 1.0, (s / 100) ** 2, 0.01, SENTENCES, design.alpha / 2))
    assert unreachable(test, design, 1.0, design.alpha) == ""
    assert unreachable(test, design, 1.0, design.alpha / 2).endswith(
        f"at α 0.025 with max_seeds = {design.max_seeds} on this test set, as the pilot estimates its variance")
    plan = planner()
    step(plan, {})
    finish(plan, {label: (1, 2, 3) for label in rows(plan)})
    step(plan, {"placement=none": test, "placement=source": seed_test(0.0, 3)})
    assert "at α 0.025" in rows(plan)["placement=none"].state.unreachable


def test_a_row_whose_outputs_equal_its_baselines_stops_for_futility():
    """Δ = 0 with se = 0: nothing left to learn, conditional power 0 (not NaN), so futility stops it."""
    plan = planner(jobs=[["placement=both"], ["placement=none"]])
    step(plan, {})
    same = SeedTest(0.0, 0.0, 1.0, 0.0, 0.0, 3, 0.0, 0.0, 0.0, SENTENCES, 2.0)
    for n in range(3, 6):
        finish(plan, {"placement=both": range(1, n + 1), "placement=none": range(1, n + 1)})
        step(plan, {"placement=none": same if n == 3 else SeedTest(0.0, 0.0, 1.0, 0.0, 0.0, n, 0.0, 0.0, 0.0,
                                                                    SENTENCES, n - 1.0)})
    none = rows(plan)["placement=none"].state
    assert (none.stopped, none.verdict) == (sequential.FUTILITY, "no evidence")
    assert none.looks[-1].cond_power == 0.0 and none.stop_n == 5


def test_a_look_takes_the_first_max_seeds_paired_seeds_of_a_real_sweep(tmp_path):
    """A rerun that retried a failed seed after its substitute finished can leave 11 paired seeds
    where max_seeds is 10: the look is taken on seeds 1-10 (the verdict's test, read from the sweep)."""
    from posenc.cells.sweep import read_sweep
    from report_fixtures import degrade, sweep_of, synthetic_test_sets, write_testset

    splits = synthetic_test_sets(test=40, test_long=0)
    corpus = write_testset(tmp_path / "cache", splits)
    refs = splits["test"][1]
    outputs = {"both": {s: degrade(refs, 0.1, s) for s in range(1, 12)},
               "none": {s: degrade(refs, 0.3 if s < 11 else 0.9, s + 50) for s in range(1, 12)}}
    sweep = sweep_of(tmp_path, "sweep", corpus, splits, outputs)
    plan = planner(jobs=[["placement=both"], ["placement=none"]])
    assert plan.next_batch(read_sweep(sweep)) == []
    none = rows(plan)["placement=none"].state
    assert [x.n for x in none.looks] == [10] and none.stopped in (sequential.EFFICACY, sequential.MAX)
    # The same look, taken by the report on seeds 1-10 alone.
    ten = sweep_of(tmp_path, "ten", corpus, splits, {p: {s: o[s] for s in range(1, 11)} for p, o in outputs.items()})
    alone = planner(jobs=[["placement=both"], ["placement=none"]])
    alone.next_batch(read_sweep(ten))
    assert rows(alone)["placement=none"].state.looks == none.looks


def test_dropping_a_row_that_renames_the_others_is_named_as_the_one_row_dropped():
    """Labels come from the keys the grid varies: with one row left it would be "the one row".
    The family is matched by overrides, so the refusal names the row that went."""
    jobs = [["optim.args.lr=1e-9"], ["optim.args.lr=0.002"]]
    plan = planner(jobs=jobs, baseline="optim.args.lr=0.002")
    step(plan, {})
    with pytest.raises(StrategyError) as err:
        planner(jobs=jobs[1:], before=plan.state(), baseline="optim.args.lr=0.002")
    assert str(err.value) == f"row optim.args.lr=1e-9 dropped: {FAMILY_ENDS}"


def test_a_new_sweep_refuses_the_seeds_only_table_and_a_level_its_simulation_cannot_resolve(tmp_path):
    """Issue 49 item 6: statistic=seeds (too permissive for the verdict's t) and a level at which a
    look would be crossed by fewer than 1,000 of the 2,000,000 null paths (its threshold 0 or a
    guess) are refused for a new sweep, in one line naming the smallest level that resolves."""
    with pytest.raises(StrategyError, match=r"^hydra\.sweeper\.statistic=seeds .* allowed for a new sweep: "
                                            r"statistic=verdict$"):
        planner(statistic="seeds")
    with pytest.raises(StrategyError) as err:
        planner(alpha=1e-5)
    text = str(err.value)
    assert text.startswith("hydra.sweeper.alpha=1e-05 over 2 rows sharing a baseline: the level 5e-06 leaves a "
                           "look ") and "\n" not in text
    smallest = float(text.split("the smallest level that resolves is ")[1].split(";")[0])
    assert text.endswith(f"allowed: alpha >= {2 * smallest:.4g} for 2 rows, fewer rows, or fewer looks")
    design = sequential.Design()
    # The level named is the edge: at it every look is crossed often enough, just below it one is not,
    # and at 1e-5 a threshold of the table really is 0.
    assert design.unresolved(smallest * 1.001) == "" and design.unresolved(smallest * 0.99) != ""
    assert min(design.thresholds(1e-5 / 2).values()) == 0.0
    assert min(design.thresholds(smallest * 1.001).values()) > 0
    # Seven rows against one baseline at α = 0.05: α/7 is below that edge for the default design.
    seven = [[f"model.args.dropout=0.{i}"] for i in range(8)]
    with pytest.raises(StrategyError, match=r"^hydra\.sweeper\.alpha=0\.05 over 7 rows sharing a baseline: "):
        planner(jobs=seven, baseline="model.args.dropout=0.0")
    assert planner(jobs=seven[:7], baseline="model.args.dropout=0.0").rows   # six rows: α/6 resolves


def test_a_new_tune_sweep_refuses_its_seeds_strategys_design_before_any_trial(tmp_path):
    """The tune strategy's best values' seeds run the same design: a new tune sweep refuses the
    seeds-only table, or a level per row its simulation cannot resolve, before any trial runs."""
    from posenc.cells.strategy import TuneRow, TuneSettings
    from posenc.harness.sweep.tune_planner import TunePlanner, checked

    rows = [TuneRow(f"placement={p}", [f"placement={p}"]) for p in ("both", "source", "none")]
    space = {"optim.args.lr": {"low": 1e-4, "high": 1e-2, "log": True}}
    for given, words in (({"statistic": "seeds"}, "hydra.sweeper.statistic=seeds is the seeds-only table"),
                         ({"alpha": 1e-5}, "hydra.sweeper.alpha=1e-05 over 2 rows sharing a baseline: ")):
        settings = checked(TuneSettings(trials=2, startup_trials=1, pruner_startup_trials=1,
                                        seeds_strategy={"effect": 1.0, **given}))
        with pytest.raises(StrategyError, match="^" + re.escape(words)):
            TunePlanner(settings, rows, space, tmp_path, name)
    ok = checked(TuneSettings(trials=2, startup_trials=1, pruner_startup_trials=1, seeds_strategy={"effect": 1.0}))
    assert TunePlanner(ok, rows, space, tmp_path, name).rows == rows


def test_the_first_launch_writes_the_designs_hash_and_a_state_edited_since_does_not_read(tmp_path):
    """Issue 49: the design and its hash at the first launch. The hash is SHA-256 over the settings
    and rows as the state holds them (recomputed here with hashlib), kept unchanged by a rerun, and
    a state whose design or family was edited by hand is refused in one line naming the file."""
    import hashlib
    plan = planner()
    step(plan, {})
    write_state(tmp_path, plan.state())
    data = json.loads((tmp_path / SeedsState.FILE).read_text())
    canonical = json.dumps({"settings": data["settings"], "rows": [r["overrides"] for r in data["rows"]]},
                           sort_keys=True, separators=(",", ":"))
    assert data["design_hash"] == hashlib.sha256(canonical.encode()).hexdigest()[:12]
    other = planner(max_seeds=12)
    assert other.state().design != plan.state().design  # another design, another hash
    again = planner(before=read_state(tmp_path))
    finish(again, {label: (1, 2, 3) for label in rows(again)})
    step(again, {"placement=none": seed_test(-25.0, 3)})
    write_state(tmp_path, again.state())
    assert json.loads((tmp_path / SeedsState.FILE).read_text())["design_hash"] == data["design_hash"]
    for edit in ({"settings": {**data["settings"], "alpha": 0.1}},
                 {"rows": [{**data["rows"][0], "overrides": ["placement=target"]}] + data["rows"][1:]}):
        (tmp_path / SeedsState.FILE).write_text(json.dumps({**data, **edit}))
        with pytest.raises(StateError) as err:
            read_state(tmp_path)
        message = str(err.value)
        assert message.startswith(f"{tmp_path / SeedsState.FILE}: its design or rows were changed after the first "
                                  f"launch (design_hash {data['design_hash']}, now ") and "\n" not in message
    legacy = {k: v for k, v in data.items() if k != "design_hash"}  # a state from before the hash still reads
    (tmp_path / SeedsState.FILE).write_text(json.dumps(legacy))
    assert read_state(tmp_path).design == "" and "design_hash" not in read_state(tmp_path).to_json()
