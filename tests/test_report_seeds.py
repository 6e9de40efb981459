"""The seeds strategy's rule (``SeedsRule``) step by step, and the whole adaptive procedure (pilot,
batches, re-planning at each look, the verdict's test at the stop) by a small direct simulation."""

import numpy as np
import pytest

from posenc.stats.seeds import MAX, NO_PLAN, PLAN, SeedsRule, Step


def test_the_pilot_comes_first_whatever_the_plan():
    rule = SeedsRule(pilot_seeds=3, max_seeds=10, batch_seeds=2)
    assert rule.next(0, None) == Step(3, "")
    assert rule.next(0, 50) == Step(3, "")
    assert rule.next(2, 2) == Step(3, "")       # fewer than the pilot (a seed failed): back to the pilot


def test_batches_up_to_the_plan_then_stop_there():
    rule = SeedsRule(pilot_seeds=3, max_seeds=10, batch_seeds=2, min_seeds=3)
    assert rule.next(3, 8) == Step(5, "")
    assert rule.next(5, 8) == Step(7, "")
    assert rule.next(7, 8) == Step(8, "")       # the last batch only to the plan
    step = rule.next(8, 8)
    assert (step.seeds, step.stopped) == (8, PLAN) and "8" in step.why
    assert rule.next(5, 4).stopped == PLAN      # a plan that fell below the seeds the row has
    assert rule.next(5, 4).seeds == 5


def test_no_row_stops_below_min_seeds_whatever_its_plan():
    rule = SeedsRule(pilot_seeds=3, max_seeds=10, batch_seeds=2)     # min_seeds 7 by default
    assert rule.floor == 7
    assert rule.next(3, 3) == Step(5, "")       # the plan is met at the pilot: the row goes on
    assert rule.next(5, 2) == Step(7, "")
    assert rule.next(6, 4) == Step(7, "")       # (a seed failed) only up to the floor
    step = rule.next(7, 4)
    assert (step.seeds, step.stopped) == (7, PLAN)
    assert rule.next(7, 9) == Step(9, "")       # above the floor the plan decides as before
    assert rule.next(3, 2000, ">1000") == Step(5, "")
    assert rule.next(7, 2000, ">1000") == Step(9, "")


def test_the_floor_gives_way_to_max_seeds_and_to_the_pilot():
    assert SeedsRule(pilot_seeds=3, max_seeds=6, batch_seeds=2).floor == 6
    step = SeedsRule(pilot_seeds=3, max_seeds=6, batch_seeds=2).next(6, 3)
    assert (step.seeds, step.stopped) == (6, PLAN)
    assert SeedsRule(pilot_seeds=4, max_seeds=10, min_seeds=2).floor == 4
    assert SeedsRule(pilot_seeds=4, max_seeds=10, min_seeds=2).next(4, 3).stopped == PLAN


def test_max_seeds_stops_a_plan_that_wants_more_and_says_so():
    rule = SeedsRule(pilot_seeds=3, max_seeds=6, batch_seeds=2)
    assert rule.next(3, 40) == Step(5, "")
    assert rule.next(5, 40) == Step(6, "")
    step = rule.next(6, 40)
    assert (step.seeds, step.stopped) == (6, MAX)
    assert "max_seeds=6" in step.why and "40" in step.why
    assert rule.next(6, 6).stopped == PLAN      # a plan of exactly max_seeds is met, not cut


def test_no_plan_goes_on_to_the_floor_and_stops_there():
    rule = SeedsRule()      # pilot 3, batches of 2, min_seeds 7
    assert rule.next(3, None) == Step(5, "")    # a pilot's "no plan" is planned again with more seeds
    assert rule.next(5, None) == Step(7, "")
    step = rule.next(7, None)
    assert (step.seeds, step.stopped) == (7, NO_PLAN) and "no number of seeds" in step.why
    step = SeedsRule(min_seeds=3).next(3, None)
    assert (step.seeds, step.stopped) == (3, NO_PLAN)


@pytest.mark.parametrize(("rule", "words"), [
    (SeedsRule(pilot_seeds=3, max_seeds=2), "max_seeds=2 is less than pilot_seeds=3"),
    (SeedsRule(max_seeds=0), "max_seeds=0 is not allowed"),
    (SeedsRule(pilot_seeds=0), "pilot_seeds=0 is not allowed"),
    (SeedsRule(batch_seeds=0), "batch_seeds=0 is not allowed"),
    (SeedsRule(min_seeds=0), "min_seeds=0 is not allowed"),
    (SeedsRule(min_seeds=6.5), "min_seeds=6.5 is not allowed"),
    (SeedsRule(pilot_seeds=True), "pilot_seeds=True is not allowed"),
    (SeedsRule(batch_seeds=False), "batch_seeds=False is not allowed"),
    (SeedsRule(max_seeds=2.5), "max_seeds=2.5 is not allowed"),
    (SeedsRule(pilot_seeds=1), "pilot_seeds=1 is not allowed; allowed: 2 or more"),
])
def test_problem_names_the_value_in_one_line(rule, words):
    problem = rule.problem()
    assert words in problem and "\n" not in problem


def test_good_values_have_no_problem():
    assert SeedsRule().problem() == "" and SeedsRule(2, 2, 1).problem() == ""
    assert SeedsRule(2, 2, 1, min_seeds=1).problem() == ""


SENTENCES = 400


@pytest.fixture(scope="module")
def pool():
    from posenc.stats.simulate import Pool
    from report_fixtures import synthetic_test_sets

    refs = synthetic_test_sets(test=SENTENCES, test_long=0)["test"][1]
    return Pool.build(refs, np.round(np.linspace(0, 0.7, 15), 3), draws=2, seed=7)


def test_the_adaptive_procedure_holds_its_level_and_delivers_its_power(pool):
    """Rows whose seeds' own part equals the sentence part, planned for a Δ that the truth needs
    about 6 seeds for on this test set, run by the rule (pilot 3, batches of 2, min_seeds 7,
    max_seeds 30 that does not bind) and tested by the verdict at the stop."""
    from scipy import optimize

    from posenc.stats import power as power_mod
    from posenc.stats.simulate import Setting, adaptive, simulate
    from posenc.stats.verdict import split_variance

    world = simulate(pool, Setting(10, SENTENCES, 0.0, 0.0), 100, seed=1)
    sentence, shared = (float(np.mean(x)) for x in split_variance(world["var_test"], world["var_test_seed"], 10))
    seed_sd = float(np.sqrt(sentence / 2))     # d_s holds two systems' seeds: its seed part = the sentence part
    effect = optimize.brentq(lambda d: power_mod.power_of(d, 6, 2 * sentence, shared, SENTENCES) - 0.8, 1e-3, 50)
    rule = SeedsRule(pilot_seeds=3, max_seeds=30, batch_seeds=2)
    null = adaptive(pool, Setting(0, SENTENCES, seed_sd, 0.0), rule, effect, comparisons=500, seed=2)
    alt = adaptive(pool, Setting(0, SENTENCES, seed_sd, effect), rule, effect, comparisons=250, seed=3)
    false_positive, power = np.mean(null["p"] < 0.05), np.mean(alt["p"] < 0.05)
    # Monte Carlo: an observed rate over 500 sweeps has sd 0.010 if the truth is 0.05 and 0.013 if it
    # is 0.10, so 0.075 passes a level of 0.05 (2.5 sd) and fails one of 0.10 (1.9 sd short). Power
    # over 250 sweeps has sd 0.025 at 0.80: 0.72 passes it (3.2 sd) and fails a procedure that
    # delivers 0.65 (2.8 sd, sd 0.030). The seeds are fixed, so the outcome is too.
    assert false_positive <= 0.075, false_positive
    assert power >= 0.72, power
    # What it costs: the plan books more than the truth's 6 seeds on average (the pilot's spread at its
    # upper limit), but the rule stops every row by its plan, max_seeds or "no plan".
    assert 6 <= alt["seeds"].mean() <= 20 and (alt["stopped"] > 0).all()
    assert (alt["seeds"] >= 7).all() and (alt["seeds"] <= 30).all() and (null["seeds"] >= 7).all()


def test_the_floor_is_what_holds_the_level_where_the_seeds_part_dominates(pool):
    """Rows whose seeds' own part is 4 times the sentence part, planned for a Δ the truth needs about
    6 seeds for: with min_seeds 7 the verdict at the stop holds its level (without the floor, rows
    that stopped at 3 or 5 seeds whose spread agreed by chance rejected too often before issue 30)."""
    from scipy import optimize

    from posenc.stats import power as power_mod
    from posenc.stats.simulate import Setting, adaptive, simulate
    from posenc.stats.verdict import split_variance

    world = simulate(pool, Setting(10, SENTENCES, 0.0, 0.0), 100, seed=1)
    sentence, shared = (float(np.mean(x)) for x in split_variance(world["var_test"], world["var_test_seed"], 10))
    seed_sd = float(np.sqrt(4 * sentence / 2))
    effect = optimize.brentq(lambda d: power_mod.power_of(d, 6, 5 * sentence, shared, SENTENCES) - 0.8, 1e-3, 50)
    rates = {}
    for floor in (3, 7):
        rule = SeedsRule(pilot_seeds=3, max_seeds=30, batch_seeds=2, min_seeds=floor)
        null = adaptive(pool, Setting(0, SENTENCES, seed_sd, 0.0), rule, effect, comparisons=1500, seed=4)
        rates[floor] = float(np.mean(null["p"] < 0.05))
        assert (null["seeds"] >= floor).all()
    # Over 1500 sweeps a rate has sd 0.006 near 0.05. Before issue 30 these seeds gave 0.067 without
    # the floor (2.8 sd above 0.05) and 0.052 with it. Since then a pilot whose seeds agree by chance
    # books as if they spread as their sentence noise, which was what stopped rows early and
    # inflated the floor-less rule: it gives 0.059 here, the floor 0.058, no longer told apart by
    # 1500 sweeps. The floor's own bound stays; the sequential design of issue 30 replaces the rule.
    assert rates[7] <= 0.06, rates


def test_the_tables_note_says_which_procedure_ran():
    """The table's strategy note: a sweep with min_seeds (the calibrated procedure) is not told to
    confirm its findings; a state from before min_seeds existed still is."""
    from types import SimpleNamespace

    from posenc.report.render import strategy_notes

    settings = {"effect": 0.5, "test_size": None, "baseline": "placement=both", "pilot_seeds": 3,
                "max_seeds": 10, "batch_seeds": 2}
    def note(s):
        return strategy_notes(SimpleNamespace(sweep=SimpleNamespace(strategy={"settings": s})))[0]

    now = note({**settings, "min_seeds": 7})
    assert "at least min_seeds = 7" in now and "Calibrated by simulation" in now and "confirm" not in now
    before = note(settings)
    assert "min_seeds =" not in before and "confirm it with a fixed-seed sweep" in before
