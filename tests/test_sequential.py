"""The group sequential design (``posenc.stats.sequential``): its thresholds against published
normal-theory boundaries, closed forms and a direct simulation of the t-test with known truth;
the Monte Carlo's error; conditional power against a direct simulation; graphical Holm on
hand-made looks; and the whole procedure's level and power in one world of real sentences."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from posenc.stats.sequential import (
    EFFICACY,
    FUTILITY,
    MAX,
    PATHS,
    VERDICT_PATHS,
    Decision,
    Design,
    Look,
    _crossings,
    _thresholds,
    _verdict_crossings,
    _verdict_paths,
    conditional_power,
    could_find,
    decide,
    design_of,
    reachable,
    repeated_ci,
    sequential_power,
    shared_grid,
    spending,
)
from posenc.stats.verdict import BETTER, NO_EVIDENCE, WORSE, degrees_of_freedom, p_values

DEFAULT = Design()
SEEDS = Design(statistic="seeds")   # the seeds-only t's table: exact, so closed forms and published tables apply


def test_the_issues_table_at_its_gamma_and_the_cache():
    """The issue's values for α = 0.05, N = 10, HSD γ = -3 (its own simulation, 4 decimals); the
    default γ is -2 since the calibration, and its table is the same computation."""
    issues = Design(gamma=-3.0, statistic="seeds")
    table = issues.thresholds()
    issue = [.0038, .0029, .0041, .0062, .0092, .0137, .0206, .0304]
    assert list(table) == list(range(3, 11))
    for (n, a), quoted in zip(table.items(), issue):
        # Monte Carlo relative sd 1/sqrt(PATHS·Δα) <= 1.5% here, plus the issue's own and its rounding.
        assert a == pytest.approx(quoted, rel=0.05, abs=0.00006), (n, a)
    hits = _thresholds.cache_info().hits   # computed once (its time: scripts/bench_seeds_sweeper.py)
    assert issues.thresholds() == table and issues.thresholds(0.05) == table
    assert _thresholds.cache_info().hits == hits + 2
    assert DEFAULT.gamma == -2.0 and SEEDS.thresholds()[3] > table[3]   # spends more at the pilot
    assert SEEDS.thresholds()[10] < table[10]                           # and less at N


def test_the_first_look_is_the_plain_t_and_one_look_is_the_fixed_test():
    """Closed forms: at the first look the threshold is the α spent there (the t's p is uniform);
    a design of one look (pilot = max) is the plain t at α."""
    for design in (SEEDS, Design(spending="obf", max_seeds=5, statistic="seeds"),
                   Design(spending="pocock", max_seeds=5, statistic="seeds"),
                   Design(gamma=2.0, max_seeds=5, statistic="seeds")):
        assert design.thresholds()[3] == pytest.approx(design.spent()[3], rel=1e-12)
    assert SEEDS.thresholds()[3] >= DEFAULT.thresholds()[3]   # the verdict's t at its least favourable shared part
    assert Design(pilot_seeds=5, max_seeds=5, statistic="seeds").thresholds(0.01) == {5: pytest.approx(0.01, rel=1e-12)}


@pytest.mark.parametrize(("kind", "published"), [
    # Lan-DeMets spending, two-sided α = 0.05, K = 5 equally spaced looks (Jennison & Turnbull 2000,
    # ch. 7; the same as R's ldbounds and gsDesign): z boundaries.
    ("obf", (4.877, 3.357, 2.680, 2.290, 2.031)),
    ("pocock", (2.438, 2.427, 2.410, 2.397, 2.386)),
])
def test_large_df_gives_the_published_normal_boundaries(kind, published):
    looks = tuple(range(2000, 10001, 2000))          # t with 1999+ df: the normal's
    spent = tuple(spending(kind, np.array(looks) / 10000, 0.05).tolist())
    z = stats.norm.isf(np.array(_crossings(looks, spent)) / 2)
    # MC error on z at these looks: <= 0.007 (OBF's second look, 1,600 crossings of 2e6); tables round to 3.
    np.testing.assert_allclose(z, published, atol=0.012)


def test_spending_is_monotone_and_spends_alpha_by_the_end():
    t = np.linspace(0, 1, 101)
    for kind, gamma in (("hsd", -3.0), ("hsd", 0.0), ("hsd", 4.0), ("obf", -3.0), ("pocock", -3.0)):
        spent = spending(kind, t, 0.05, gamma)
        assert spent[0] == pytest.approx(0, abs=1e-15) and spent[-1] == pytest.approx(0.05, rel=1e-12)
        assert np.all(np.diff(spent) > 0), kind
    assert spending("hsd", 0.3, 0.05, 0.0) == pytest.approx(0.015)      # γ = 0: linear
    # Thresholds rise with the level at every look (common random numbers), as Holm needs.
    low, high = DEFAULT.thresholds(0.05 / 3), DEFAULT.thresholds(0.05 / 2)
    assert all(low[n] < high[n] < DEFAULT.thresholds()[n] for n in low)


def test_the_monte_carlo_error_is_within_its_stated_bound():
    """Another seed of the same size: each threshold within 5 of its stated sds (relative sd
    1/sqrt(PATHS·Δα) for the look's own α; the earlier looks' errors add a little)."""
    looks = tuple(range(3, 11))
    spent = DEFAULT.spent()
    other = _crossings(looks, tuple(spent[n] for n in looks), seed=12345)
    increments = np.diff([0.0, *(spent[n] for n in looks)])
    for n, a, b, increment in zip(looks, SEEDS.thresholds().values(), other, increments):
        bound = 0 if n == 3 else 5 / math.sqrt(PATHS * increment)
        assert abs(a - b) <= bound * a + 1e-15, (n, a, b)


def test_the_design_holds_alpha_on_a_direct_simulation_of_t_tests():
    """Known truth: normal paired differences (σ = 3, mean 0), scipy's one-sample t at every n,
    rejection when p <= a(n) at any look. A fresh generator, not the thresholds' blocks."""
    rng = np.random.default_rng(7)
    paths = 200_000
    data = rng.normal(0.0, 3.0, (paths, 10))
    rejected, first = np.zeros(paths, dtype=bool), {}
    for n, a in SEEDS.thresholds().items():
        p = stats.ttest_1samp(data[:, :n], 0.0, axis=1).pvalue
        first[n] = np.mean(~rejected & (p <= a))
        rejected |= p <= a
    sd = math.sqrt(0.05 * 0.95 / paths)       # 0.0005
    assert abs(rejected.mean() - 0.05) < 4 * sd, rejected.mean()
    spent = DEFAULT.spent()
    for n in first:     # each look spends its share of α (binomial sd plus the thresholds' own MC error)
        share = spent[n] - spent.get(n - 1, 0.0)
        assert abs(first[n] - share) < 4 * math.sqrt(share / paths) + 0.03 * share, (n, first[n], share)


def _verdict_rejections(design: Design, level: float, shared: float, paths: int = 200_000, seed: int = 11):
    """Known truth (Δ = 0): seed differences d_s = c + e_s with e_s ~ N(0, 1) and one test set's c ~
    N(0, shared) per sweep; at every look the verdict's own p (``verdict.p_values``: se² = s_d²/n +
    shared, the guarded Welch-Satterthwaite df on 1,000 sentences), rejected when p <= a(n)."""
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((paths, 1)) * math.sqrt(shared) + rng.standard_normal((paths, design.max_seeds))
    rejected = np.zeros(paths, dtype=bool)
    for n, a in design.thresholds(level).items():
        x = d[:, :n]
        p, _, _ = p_values(x.mean(1), x.std(1, ddof=1), shared, shared, n, 1000)
        rejected |= p <= a
    return rejected.mean()


@pytest.mark.parametrize("rows", [1, 5])
def test_the_verdicts_thresholds_hold_the_level_whatever_the_shared_part(rows):
    """The tested statistic is the verdict's: its thresholds hold α/m with no shared part, at the
    least favourable one (1% of the seeds' variance) and at a large one, for one row and at five
    rows' depth; the seeds-only table does not at five rows' depth (results/significance_calibration.md)."""
    level, paths = 0.05 / rows, 200_000
    sd = math.sqrt(level * (1 - level) / paths)
    for shared in (0.0, 0.01, 0.3):
        rate = _verdict_rejections(DEFAULT, level, shared, paths)
        assert rate <= level + 3 * sd, (shared, rate / level)
    assert _verdict_rejections(DEFAULT, level, 0.0, paths) > 0.75 * level   # conservative, not idle
    if rows == 5:
        assert _verdict_rejections(SEEDS, level, 0.01, paths) > level + 4 * sd


def test_the_verdicts_table_is_the_least_favourable_and_its_monte_carlo_error_is_bounded():
    """Each look's threshold is at most the seeds-only one (the minimum starts from that table),
    neighbourhood), the grid reaches below 0.004·pilot/N, and another seed's table spends each look's
    α within its stated Monte Carlo error."""
    looks, level = tuple(range(3, 11)), 0.01
    spent = DEFAULT.spent(level)
    table, seeds = DEFAULT.thresholds(level), SEEDS.thresholds(level)
    assert all(table[n] <= seeds[n] for n in looks) and table[3] < seeds[3] / 5
    assert min(shared_grid(3, 10)) < 0.004 * 3 / 10 and min(shared_grid(3, 100)) < 0.004 * 3 / 100
    increments = np.diff([0.0, *(spent[n] for n in looks)])
    for shared in (0.01, 0.02):
        # Another seed's table, run on this seed's paths: each look spends its share of α within 5 of
        # the stated relative sds 1/sqrt(paths·Δα) (both tables' errors).
        other = _verdict_crossings(looks, tuple(spent[n] for n in looks), shared, seed=12345)
        alive = np.ones(VERDICT_PATHS, dtype=bool)
        for n, a, (t, seed_part), increment in zip(looks, other, _verdict_paths(looks, shared), increments):
            p = 2 * stats.t.sf(t, degrees_of_freedom(seed_part, shared, n, math.inf))
            crossed = alive & (p <= a)
            alive &= ~crossed
            assert abs(crossed.mean() - increment) <= 5 * math.sqrt(2 / (VERDICT_PATHS * increment)) * increment, \
                (shared, n, crossed.mean(), increment)


def test_a_state_without_a_statistic_ran_the_seeds_only_table():
    assert design_of({"gamma": -3.0}) == Design(gamma=-3.0, statistic="seeds")
    assert design_of({"statistic": "verdict"}) == DEFAULT


@pytest.mark.parametrize(("design", "words"), [
    (Design(gamma=11.0), "gamma=11.0 is not allowed; allowed: -10 to 10"),
    (Design(gamma=math.nan), "gamma=nan is not allowed"),
    (Design(spending="linear"), "spending='linear' is not allowed; allowed: hsd, obf, pocock"),
    (Design(futility=0.0), "futility=0.0 is not allowed; allowed: 0 < futility < 1"),
    (Design(futility=1.0), "futility=1.0 is not allowed"),
    (Design(pilot_seeds=1), "pilot_seeds=1 is not allowed; allowed: 2 or more"),
    (Design(pilot_seeds=2.5), "pilot_seeds=2.5 is not allowed"),
    (Design(max_seeds=2), "max_seeds=2 is less than pilot_seeds=3"),
    (Design(max_seeds=101), "max_seeds=101 is not allowed; allowed: at most 100"),
    (Design(alpha=1.5), "alpha=1.5 is not allowed"),
    (Design(futility_from=True), "futility_from=True is not allowed"),
    (Design(statistic="z"), "statistic='z' is not allowed; allowed: verdict, seeds"),
])
def test_problem_names_the_value_in_one_line(design, words):
    problem = design.problem()
    assert words in problem and "\n" not in problem
    assert Design().problem() == "" and Design(spending="obf", gamma=-10.0, futility=0.5).problem() == ""


def _look(n, p, delta=1.0, df=None):
    """A look whose t-statistic is consistent with its p (df n - 1 by default)."""
    df = n - 1 if df is None else df
    se = abs(delta) / stats.t.isf(p / 2, df)
    return Look(n, delta, se, df, p, spread=n * se ** 2, shared=0.0)


def test_graphical_holm_passes_a_rejected_rows_alpha_and_retests_earlier_looks():
    """Three rows. A crosses at α/3. B's pilot look (n = 3) lies between the α/3 and α/2 thresholds
    and its latest look (n = 5) crosses neither: once A is rejected, B is retested at its pilot look
    at α/2 and rejects there. C then gets α, but its p crosses nothing."""
    t3, t2, t1 = (DEFAULT.thresholds(0.05 / k) for k in (3, 2, 1))
    rows = {"A": [_look(3, t3[3] / 2, 5.0), _look(5, t3[5] / 2, 5.0)],
            "B": [_look(3, (t3[3] + t2[3]) / 2, -2.0), _look(5, 0.5, -0.3)],
            "C": [_look(3, 0.4), _look(5, t1[5] * 2)]}
    out = decide(DEFAULT, 2.0, rows)
    # A crosses at both looks: its decision is the first crossing (issue 49), not the latest.
    assert (out["A"].stopped, out["A"].verdict, out["A"].look.n, out["A"].level) == (EFFICACY, BETTER, 3, 0.05 / 3)
    assert (out["B"].stopped, out["B"].verdict, out["B"].look.n) == (EFFICACY, WORSE, 3)
    assert out["B"].level == pytest.approx(0.025) and out["B"].why == "efficacy at 3 seeds"
    assert out["C"].stopped == "" and out["C"].level == pytest.approx(0.05) and out["C"].verdict == ""
    assert out["C"].look.threshold == t1[5]
    # Without A's rejection B stays at α/3 and does not cross.
    alone = decide(DEFAULT, 2.0, {"A": [_look(5, 0.6)], "B": rows["B"], "C": rows["C"]})
    assert alone["B"].stopped == "" and alone["B"].level == pytest.approx(0.05 / 3)
    # The planned effect decides futility, never a rejection.
    for effect in (0.01, 100.0):
        again = decide(DEFAULT, effect, rows)
        assert {k: (d.stopped == EFFICACY, d.verdict) for k, d in again.items() if d.stopped == EFFICACY} == \
            {"A": (True, BETTER), "B": (True, WORSE)}


def test_a_retest_reports_the_first_look_that_crosses_not_the_latest():
    """Issue 49 item 3: B is open at α/2 with looks at 3, 4 and 5, crossing none at α/2; once A is
    rejected B is retested at α, where its looks at 4 and 5 both cross. Its decision is the first
    crossing (4): the stage-wise p and the median-unbiased Δ assume no crossing before the stop."""
    t2, t1 = (DEFAULT.thresholds(0.05 / k) for k in (2, 1))
    between = [(t2[n] + t1[n]) / 2 for n in (4, 5)]
    assert all(t1[n] > b > t2[n] for n, b in zip((4, 5), between))
    rows = {"A": [_look(3, 0.5), _look(4, 0.5), _look(5, t2[5] / 2)],
            "B": [_look(3, 0.5, 1.0), _look(4, between[0], 1.0), _look(5, between[1], 1.0)]}
    out = decide(DEFAULT, 2.0, rows)
    assert out["A"].stopped == EFFICACY and out["A"].level == pytest.approx(0.025)
    assert (out["B"].stopped, out["B"].look.n, out["B"].why) == (EFFICACY, 4, "efficacy at 4 seeds")
    assert out["B"].level == pytest.approx(0.05) and out["B"].look.p == pytest.approx(between[0])


def test_every_rows_interval_is_at_its_level_before_any_row_rejected():
    """Issue 60 item 1: A rejects at α/2 and B, retested at α once A's α passed on, rejects at its
    pilot look. B's verdict is α's, but its interval is the repeated CI at α/2, labelled so: the
    level passed on depends on A's data, and an interval at it does not cover what its label says."""
    t2, t1 = (DEFAULT.thresholds(0.05 / k) for k in (2, 1))
    rows = {"A": [_look(3, t2[3] / 2, 5.0)], "B": [_look(3, (t2[3] + t1[3]) / 2, 1.0)]}
    out = decide(DEFAULT, 2.0, rows)
    a, b = out["A"], out["B"]
    assert (a.stopped, a.level, a.ci_level) == (EFFICACY, 0.025, 0.025)
    assert (b.stopped, b.level, b.ci_level) == (EFFICACY, 0.05, 0.025)
    assert b.ci == repeated_ci(b.look, t2[3]) and b.ci != repeated_ci(b.look, t1[3])
    assert b.ci[0] < 0 < 1.0 < b.ci[1]     # rejected at the level passed on; its 97.5% interval holds 0
    open_row = decide(DEFAULT, 2.0, {"A": [_look(3, 0.5)], "B": [_look(3, 0.6)], "C": []})
    assert [d.ci_level for d in open_row.values()] == [pytest.approx(0.05 / 3)] * 3
    assert Decision.from_dict(json.loads(json.dumps(b.to_dict()))) == b


def test_the_intervals_cover_at_their_label_where_the_passed_on_level_did_not():
    """Issue 60 item 1, by simulation (normal theory, the design's own decide): two rows sharing a
    baseline, A null, B 2.5 σ better. Where B rejected first, A was tested at α; an interval at
    α's thresholds misses A's truth about 6% of the time (the review's 6.2%), the one at α/2 (A's
    label) at most 2.5%. The script's coverage part measures the rest (1.2 and 1.6 σ, both rows)."""
    from posenc.stats.simulate import normal_family

    sweeps = normal_family(DEFAULT, (0.0, 2.5), 1.0, 800, shared=0.02, seed=60)
    passed = [s[0] for s in sweeps if s[0].level == pytest.approx(0.05)]
    assert len(passed) > 350 and all(s[0].ci_level == pytest.approx(0.025) for s in sweeps)
    missed = np.mean([not d.ci[0] <= 0 <= d.ci[1] for d in passed])
    old = np.mean([not lo <= 0 <= hi for lo, hi in
                   (repeated_ci(d.look, DEFAULT.thresholds(0.05)[d.look.n]) for d in passed)])
    sd = math.sqrt(0.025 * 0.975 / len(passed))
    assert missed <= 0.025 + 2 * sd and old > 0.025 + 3 * sd, (missed, old)
    both = np.mean([all(d.ci[0] <= t <= d.ci[1] for d, t in zip(s.values(), (0.0, 2.5))) for s in sweeps])
    assert both >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / len(sweeps))


def test_frozen_decisions_stay_and_count():
    """A row frozen for efficacy raises the others' level; one frozen for futility keeps its verdict
    even where its looks would now cross, and keeps its share of α unused."""
    t2 = DEFAULT.thresholds(0.025)
    rows = {"A": [_look(3, 0.001)], "B": [_look(3, 0.3), _look(5, t2[5] * 0.9)], "C": [_look(3, 1e-6)]}
    frozen = {"A": decide(DEFAULT, 2.0, {"A": [_look(3, 1e-6)], "B": [], "C": []})["A"],
              "C": Decision(FUTILITY, "futility at 5 seeds: ...", NO_EVIDENCE, _look(5, 0.9))}
    assert frozen["A"].stopped == EFFICACY
    out = decide(DEFAULT, 2.0, rows, {k: v.to_dict() for k, v in frozen.items()})
    assert out["C"] == frozen["C"] and out["A"] == frozen["A"]
    assert out["B"].stopped == EFFICACY and out["B"].level == pytest.approx(0.025)


def test_futility_max_seeds_and_the_repeated_interval():
    design = Design()
    near_zero = _look(5, 0.9, 0.05)            # 5 seeds, Δ ~ 0 with a large se: the planned 0.5 is out of reach
    out = decide(design, 0.5, {"row": [_look(3, 0.8, 0.05), near_zero]})["row"]
    assert out.stopped == FUTILITY and out.verdict == NO_EVIDENCE and out.look.cond_power < 0.10
    assert out.why.startswith("futility at 5 seeds: conditional power ") and "its 10 seeds could still" in out.why
    assert decide(design, 0.5, {"row": [_look(3, 0.9, 0.05)]})["row"].stopped == ""      # not before n = 5
    last = decide(design, 0.5, {"row": [_look(10, 0.2)]})["row"]
    assert (last.stopped, last.why, last.verdict) == (MAX, "max_seeds", NO_EVIDENCE)
    hit = decide(design, 0.5, {"row": [_look(4, 0.001, 2.0, df=12.5)]})["row"]
    low, high = hit.ci
    assert hit.stopped == EFFICACY and 0 < low < 2.0 < high       # the repeated CI excludes 0 iff it rejects
    assert high - 2.0 == pytest.approx(stats.t.isf(hit.look.threshold / 2, 12.5) * hit.look.se)
    assert json.loads(json.dumps(hit.to_dict())) == json.loads(json.dumps(Decision.from_dict(hit.to_dict()).to_dict()))


def test_conditional_power_matches_a_direct_simulation():
    """d_s = θ + c + e_s with c ~ N(0, shared) shared by all seeds and e_s ~ N(0, spread): draw whole
    sweeps of N seeds at θ = E, keep those whose Δ at n = 5 lies near a value, and count how often
    |Δ_N| crosses the final boundary; that is the conditional power at that Δ."""
    spread, shared, effect, n, most = 4.0, 0.3, 1.5, 5, DEFAULT.max_seeds
    rng = np.random.default_rng(3)
    sweeps = 2_000_000
    c = rng.normal(0, math.sqrt(shared), sweeps)
    e = rng.normal(0, math.sqrt(spread), (sweeps, most))
    delta_n = effect + c + e[:, :n].mean(1)
    delta_all = effect + c + e.mean(1)
    se_n, se_all = math.sqrt(spread / n + shared), math.sqrt(spread / most + shared)
    for observed in (0.3, 1.0):
        near = np.abs(delta_n - observed) < 0.02
        look = Look(n, observed, se_n, 1e6, 0.5, spread, shared, sentences=0)
        critical = stats.t.isf(DEFAULT.thresholds()[most] / 2, most - 1)
        simulated = np.mean(np.abs(delta_all[near]) > critical * se_all)
        expected = conditional_power(look, DEFAULT, effect)
        assert abs(simulated - expected) < 4 * math.sqrt(expected * (1 - expected) / near.sum()) + 0.01, \
            (observed, simulated, expected, near.sum())
        # could_find: the Δ at which this look's conditional power is 0.8 (near tail; the far one adds ~0).
        assert conditional_power(look, DEFAULT, could_find(look, DEFAULT)) == pytest.approx(0.8, abs=1e-3)
    # Without components all of se² is the seeds' part: the largest projected power (futility goes on).
    bare = Look(n, 0.3, se_n, 1e6, 0.5)
    assert conditional_power(bare, DEFAULT, effect) >= conditional_power(
        Look(n, 0.3, se_n, 1e6, 0.5, spread, shared), DEFAULT, effect)
    # reachable: the shared part caps the power that N seeds can give.
    assert sequential_power(DEFAULT, 1.0, 4.0, 0.0) > sequential_power(DEFAULT, 1.0, 4.0, 0.3)
    assert reachable(DEFAULT, 3.0, 4.0, 0.0) and not reachable(DEFAULT, 1.0, 4.0, 0.3)
    # Closed form: one look at N (pilot = max) with no shared part, known se, t(N - 1) critical:
    # power = Φ(E/se - z) + Φ(-E/se - z) up to the t/normal gap, within the Monte Carlo's 0.004 sd.
    one = Design(pilot_seeds=10, max_seeds=10)
    z = stats.t.isf(0.05 / 2, 9)
    expected = stats.norm.cdf(2 / 1 - z) + stats.norm.cdf(-2 - z)
    assert sequential_power(one, 2.0, 10.0, 0.0) == pytest.approx(expected, abs=0.015)
    # Only a shared part (variance 1): every look sees the same Δ ~ N(E, 1) with se 1, so more seeds
    # add nothing: the power is P(|Δ| > the smallest critical t over the looks), whatever N.
    smallest = min(stats.t.isf(a / 2, n - 1) for n, a in DEFAULT.thresholds().items())
    capped = stats.norm.sf(smallest - 1.0) + stats.norm.cdf(-smallest - 1.0)
    assert sequential_power(DEFAULT, 1.0, 0.0, 1.0) == pytest.approx(capped, abs=0.012) and capped < 0.2


SENTENCES = 400


@pytest.fixture(scope="module")
def pool():
    from posenc.stats.simulate import Pool
    from report_fixtures import synthetic_test_sets

    refs = synthetic_test_sets(test=SENTENCES, test_long=0)["test"][1]
    return Pool.build(refs, np.round(np.linspace(0, 0.7, 15), 3), draws=2, seed=7)


def test_the_sequential_procedure_holds_its_level_and_stops_obvious_rows_early(pool):
    """One world of real sentences (the seeds' own part equal to the sentence part), three rows
    sharing a baseline run by the design as the sweeper runs it (pilot 3, batches of 2, graphical
    Holm, futility at the planned Δ): the family-wise rate under the null, and an obvious effect
    stopped at the pilot."""
    from scipy import optimize

    from posenc.stats import power as power_mod
    from posenc.stats.simulate import SEQUENTIAL_STOPS, Setting, sequential, simulate
    from posenc.stats.verdict import split_variance

    world = simulate(pool, Setting(10, SENTENCES, 0.0, 0.0), 100, seed=1)
    sentence, shared = (float(np.mean(x)) for x in split_variance(world["var_test"], world["var_test_seed"], 10))
    seed_sd = float(np.sqrt(sentence / 2))
    effect = optimize.brentq(lambda d: power_mod.power_of(d, 6, 2 * sentence, shared, SENTENCES) - 0.8, 1e-3, 50)
    null = sequential(pool, Setting(0, SENTENCES, seed_sd, 0.0), DEFAULT, effect, rows=3, comparisons=600, seed=2)
    family = np.mean((null["verdict"] != 0).any(1))
    # Over 600 sweeps a rate has sd 0.009 at 0.05: 0.07 passes a level of 0.05 (2.2 sd) and fails
    # one of 0.10 (3.4 sd short). The seeds are fixed, so the outcome is too.
    assert family <= 0.07, family
    assert (null["seeds"] >= 3).all() and (null["seeds"] <= 10).all()
    assert null["seeds"].mean() < 7          # futility stops most null rows before today's floor of 7
    assert (null["baseline_seeds"] == null["seeds"].max(1)).all()     # the baseline runs as long as any row
    obvious = sequential(pool, Setting(0, SENTENCES, seed_sd, 20 * effect), DEFAULT, effect, rows=3,
                         comparisons=100, seed=3)
    assert (obvious["verdict"] == 1).all()
    assert (obvious["stopped"] == SEQUENTIAL_STOPS.index(EFFICACY)).all() and obvious["seeds"].mean() <= 3.2


def test_a_family_whose_rows_have_all_rejected_keeps_its_decisions():
    """decide() with every row already stopped for efficacy: nothing to retest, the frozen verdicts back."""
    design = Design()
    look = Look(3, -25.0, 0.5, 2.0, 1e-6)
    first = decide(design, 4.0, {"a": [look], "b": [look]})
    assert {d.stopped for d in first.values()} == {EFFICACY}
    assert decide(design, 4.0, {"a": [look], "b": [look]}, first) == first


def test_the_stagewise_p_is_uniform_under_the_null_and_at_most_alpha_exactly_when_a_row_crosses():
    """An outside simulation of the design under the null (seeds' t, a look at every n): the stage-wise
    ordering p of where each path stopped is uniform, and <= α exactly for the paths that crossed."""
    from scipy import special

    from posenc.stats.sequential import stagewise_p

    design = Design(max_seeds=6)
    alpha = design.alpha / 3
    table = design.thresholds(alpha)
    rng = np.random.default_rng(7)
    d = rng.standard_normal((20_000, design.max_seeds))
    ps, crossed = [], []
    for path in d:
        for n in range(design.pilot_seeds, design.max_seeds + 1):
            x = path[:n]
            p = float(2 * special.stdtr(n - 1, -abs(x.mean()) / (x.std(ddof=1) / math.sqrt(n))))
            if p <= table[n] or n == design.max_seeds:
                ps.append(stagewise_p(design, n, p, alpha))
                crossed.append(p <= table[n])
                break
    ps, crossed = np.array(ps), np.array(crossed)
    assert np.all(ps[crossed] <= alpha) and np.all(ps[~crossed] >= alpha)   # <= α exactly when it rejected
    for q in (alpha, 0.05, 0.2, 0.5, 0.8):
        assert abs((ps <= q).mean() - q) < 4 * math.sqrt(q * (1 - q) / len(ps)) + 0.001


def test_the_stagewise_p_holds_its_level_with_a_shared_part_the_pilot_included():
    """Issue 49 item 2: the verdict's t with a test-set shared part of 2% of the seeds' variance, the
    least favourable for the pilot's look, where the verdict's own p is too small (P(p <= 0.0005)
    is about 4.6 times 0.0005 at 3 seeds): the stage-wise p, taken on the verdict's paths of every
    shared part the thresholds were simulated for, is at most uniform, pilot included, and <= α
    exactly when the row rejected."""
    from posenc.stats.sequential import null_stops, stagewise_p

    design, shared, paths = Design(max_seeds=6), 0.02, 20_000
    alpha = design.alpha
    table = design.thresholds(alpha)
    rng = np.random.default_rng(11)
    d = rng.standard_normal((paths, 1)) * math.sqrt(shared) + rng.standard_normal((paths, design.max_seeds))
    stop, p_stop, crossed = null_stops(design, table, shared, d)
    ps = np.array([stagewise_p(design, n, p, alpha) for n, p in zip(stop, p_stop)])
    assert np.all(ps[crossed] <= alpha) and np.all(ps[~crossed] >= alpha)
    at_pilot = (stop == design.pilot_seeds) & (p_stop <= 0.0005)
    assert at_pilot.mean() > 0.0005 + 4 * math.sqrt(0.0005 / paths)   # the raw p, reported until issue 49
    for q in (0.0005, 0.005, alpha, 0.2, 0.5, 0.8):
        assert (ps <= q).mean() <= q + 4 * math.sqrt(q * (1 - q) / paths), q


def test_the_median_unbiased_delta_is_median_unbiased_where_the_raw_delta_at_an_efficacy_stop_is_not():
    """Normal theory with known components, the design's own boundaries: over many stops, the
    estimate lies above the truth half the time; Δ at the stop overstates it."""
    from scipy import special

    from posenc.stats.sequential import median_unbiased
    from posenc.stats.verdict import degrees_of_freedom

    design, spread, shared, sentences, theta = Design(max_seeds=6), 0.5, 0.02, 1000, 1.2
    alpha = design.alpha
    table = design.thresholds(alpha)
    rng = np.random.default_rng(11)
    above, early = 0, []
    runs = 240
    for _ in range(runs):
        deltas = theta + rng.standard_normal() * math.sqrt(shared) \
            + np.cumsum(rng.standard_normal(design.max_seeds) * math.sqrt(spread)) / np.arange(1, 7)
        for n in range(design.pilot_seeds, design.max_seeds + 1):
            se = math.sqrt(spread / n + shared)
            df = float(degrees_of_freedom(spread / n, shared, n, sentences))
            bound = float(special.stdtrit(df, 1 - table[n] / 2)) * se
            if abs(deltas[n - 1]) > bound or n == design.max_seeds:
                look = Look(n, float(deltas[n - 1]), se, df, 0.0, spread, shared, sentences)
                estimate = median_unbiased(design, look, alpha, paths=4000)
                above += estimate >= theta
                if n < design.max_seeds:
                    early.append((float(deltas[n - 1]), estimate))
                break
    assert len(early) > runs / 5                              # the design did stop early often
    assert abs(above / runs - 0.5) < 3 * math.sqrt(0.25 / runs)
    raw, adjusted = np.array(early).T
    assert raw.mean() - theta > 0.2 and abs(adjusted.mean() - theta) < raw.mean() - theta   # early stops overstate
