"""The group sequential seeds design (issue 30): every row of a family sharing a baseline runs a
pilot, then a look after every batch; it stops for efficacy when its p crosses a threshold fixed
before the pilot, for futility when the planned effect can no longer be found, or at max_seeds.

Call contract (pure: numpy and scipy only; the sweeper and the report build on it):

- ``Design(alpha, pilot_seeds, max_seeds, spending, gamma, futility, futility_from)``: the one home
  of the defaults. ``Design.problem()`` is one line naming a bad value and what is allowed, or "";
  every other call assumes it is "".
- ``Design.thresholds(alpha=None) -> {n: a(n)}``: the two-sided nominal p threshold of the verdict's
  t for every n in pilot_seeds..max_seeds at level ``alpha`` (default the design's; the sweeper asks
  for α/m and the levels graphical Holm passes on). Cached per (spending, γ, pilot, N, alpha,
  statistic); about a second each.
- ``Look``: one look at a row (n, Δ, se, df, p; the variance components that project se to N;
  threshold and conditional power once ``decide`` has judged it). ``Look.of(seed_test)`` takes a
  ``verdict.SeedTest``; its p is the verdict's (``verdict.p_values``), so a mend of that test flows
  into this design.
- ``conditional_power(look, design, effect, alpha=None)`` and ``could_find(...)``: the chance that
  the row's N seeds reject if the truth is ``effect``, and the |Δ| its N seeds could still find.
- ``decide(design, effect, rows, frozen=None) -> {name: Decision}``: rows is {name: [looks so far]}
  for the m rows sharing one baseline; frozen holds the Decisions taken at earlier calls (a stopped
  row's verdict never changes). Returns a Decision for every row: ``stopped`` "" (go on),
  EFFICACY, FUTILITY or MAX; ``why`` as the table says it; ``verdict`` (""
  while going on); ``look`` (for efficacy the first look that crosses at the row's level, an earlier one than
  its latest where a retest at a higher level rejects there; else the latest); ``level`` (α / rows
  not rejected when it stopped: what it was tested at); ``ci`` (the repeated confidence interval at
  that look at ``ci_level`` = α/m, the row's level before any row rejected: the level that does not
  depend on the data, so the one its coverage holds at; ``repeated_ci``). Decisions and Looks are
  JSON-serialisable (``Decision.to_dict``, ``Decision.from_dict``).
- After a stop: ``stagewise_p(design, n, p, alpha)``, the stage-wise ordering p of a row that
  stopped at look n, the largest over the null worlds the thresholds hold for (at least uniform
  under the null, the pilot's look included; at most α exactly when it crossed), and
  ``median_unbiased(design, look, alpha)``, the median-unbiased Δ under that ordering (normal
  theory with the look's variance components taken as known). ``design_of(settings)``: the
  Design a sweep's state ran.
- ``sequential_power(design, effect, spread, shared)`` and ``reachable(...)``: what N seeds can give,
  and whether that reaches 80% (a test set whose own sampling dominates caps it; the sweeper
  says so before spending seeds).

Thresholds. Error spending (Lan & DeMets 1983) on information time n/N: the α spent by look n is
f(n/N); a(n) is set so that, under the null, the chance of a first crossing at n is at most
f(n/N) - f((n-1)/N). Each look tests the verdict's t: Δ over se² = s_d²/n + the test set's shared
part, with the verdict's guarded Welch-Satterthwaite df. Its looks share one running variance
estimate and one test set, so their joint law is not the normal one of the classic tables, and it
depends on the shared part's size against the seeds' variance, which is not known before the
pilot. So the table is simulated (``_verdict_crossings``) for a grid of shared parts
(``shared_grid``), and each look takes the smallest threshold any of them needs: the level holds
whatever the shared part (the least favourable one is 1-2% of σ² at the pilot's look, where the
seeds-only table let a row at α/5 reject 1.17 times as often as it should;
results/significance_calibration.md). Without a shared part the verdict's t is the seeds' own t,
whose table (``_crossings``) is exact up to Monte Carlo error: the sum and the sum of squares of
the seeds' differences grow by independent normal and chi-square blocks. The shared part is taken
as known (it is estimated from every sentence) and the sentences as endless (the verdict's df is
then largest: least favourable). Monte Carlo: the α spent at a later look has relative sd
1/sqrt(paths·Δα) (for the default design's second look, about 1.3% at α on the seeds' 2,000,000
paths and 6% at α/5 on a shared part's 400,000); the minimum over the grid errs towards smaller
thresholds.
tests/test_sequential.py bounds the error by a second seed. ``Design.statistic="seeds"`` keeps the
seeds-only table of sweeps started before 2026-12-03 (their states carry no statistic). The
table assumes a look at every n, so a sweep that looks less often (batches of 2) spends less than
α: conservative. Futility is non-binding: it never changes the thresholds.

Conditional power (Lan & Wittes 1988; Jennison & Turnbull 2000, ch. 10): with information
I_n = 1/se_n² and se_N² = spread/N + shared (the row's seeds' spread and the test set's shared
part, projected to N seeds), the scores Δ·I have independent increments even with the shared part
(Cov(Δ_n, Δ_N) = shared + spread/N = Var(Δ_N)), so Δ_N given Δ_n is normal with mean
(Δ_n I_n + θ(I_N - I_n))/I_N and variance (I_N - I_n)/I_N². θ = ±effect in the direction of Δ_n.

Several rows: the graphical Holm procedure for group sequential designs (Maurer & Bretz 2013; Ye et
al. 2013). Every row starts at α/m; a rejected row's weight passes equally to the rows not
rejected, which are retested at every look they have had, at the higher level's thresholds.
With Holm's transitions a row's level is α / (rows not rejected). A row stopped for futility or at
max_seeds keeps its share unused (its verdict is frozen; not retesting it is conservative).
The planned effect only decides futility, never a rejection.

Intervals. The level passed on decides the verdict (the family-wise error holds), but an interval
at it would claim a coverage it does not have: the level depends on other rows' data, which share
the baseline's. With two rows sharing a baseline, A null and B 1.2 to 2.5 σ better, A's interval at
the 95% it got once B rejected missed 6-11% of the time (issue 60). So every row's repeated CI is at
α/m, fixed before the pilot, whose coverage holds whatever the stopping rule and the other rows do
(scripts/calibrate_significance.py --only coverage; results/significance_calibration.md). A row
that rejected at a level passed on to it can have an interval that holds 0.
"""

import math
from dataclasses import asdict, dataclass, field, fields
from functools import cache

import numpy as np

from posenc.stats.verdict import BETTER, NO_EVIDENCE, WORSE, degrees_of_freedom, guard_factor

EFFICACY, FUTILITY, MAX = "efficacy", "futility", "max_seeds"    # Decision.stopped ("" while going on)
SPENDING = ("hsd", "obf", "pocock")
# What the thresholds are simulated for: the verdict's t (its se with the test set's shared part, its
# guarded Welch-Satterthwaite df), least favourable over the shared part; or the seeds-only t, the
# table of sweeps started before 2026-12-03, anticonservative for the verdict's t by up to 17% at α/5.
STATISTICS = ("verdict", "seeds")
OLDER = {"statistic": "seeds"}  # what a state written before a setting existed ran
OLDER_WHY = {"statistic": "the seeds-only t's table of the sweeps started before 2026-12-03"}
GAMMA_RANGE = (-10.0, 10.0)   # HSD's γ: -4 is OBF-like, 1 Pocock-like; beyond ±10 the spending is a step
MAX_LOOKS = 100               # max_seeds cap: the Monte Carlo's cost grows with the looks
PATHS, PATHS_SEED = 2_000_000, 20261202   # the thresholds' Monte Carlo: paths and its fixed seed
VERDICT_PATHS = 400_000                    # paths per shared part of the verdict's t (``shared_grid``)
SHARED_TOP, SHARED_FLOOR = 0.08, 0.004     # the shared parts tried, in units of the seeds' σ²
POWER = 0.8                   # the power "could still have found" and ``reachable`` speak of
MIN_CROSSINGS = 1_000         # a look's null crossings (of PATHS) below which its threshold is not estimated


@dataclass(frozen=True)
class Design:
    alpha: float = 0.05
    pilot_seeds: int = 3
    max_seeds: int = 10
    spending: str = "hsd"      # "hsd" (Hwang-Shih-DeCani), "obf" / "pocock" (Lan-DeMets)
    # HSD's γ: at -2 rows five times the planned effect stop within 3.3 seeds on average when alone,
    # and within 3.1-3.8 in families of three under the verdict's thresholds; at -3 more
    # (results/significance_calibration.md)
    gamma: float = -2.0
    futility: float = 0.10     # stop for futility when the conditional power at the effect falls below this
    futility_from: int = 5     # the first n at which futility may stop a row
    statistic: str = "verdict"  # STATISTICS: the test whose crossings the thresholds are simulated for

    def problem(self) -> str:
        """What is wrong with these values, in one line naming the value and what is allowed, or ""."""
        for name in ("pilot_seeds", "max_seeds", "futility_from"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                return f"{name}={value!r} is not allowed; allowed: a whole number"
        for name in ("alpha", "gamma", "futility"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return f"{name}={value!r} is not allowed; allowed: a finite number"
        if self.spending not in SPENDING:
            return f"spending={self.spending!r} is not allowed; allowed: {', '.join(SPENDING)}"
        if self.statistic not in STATISTICS:
            return (f"statistic={self.statistic!r} is not allowed; allowed: {', '.join(STATISTICS)} (the verdict's t, "
                    f"or the seeds-only t of sweeps started before 2026-12-03)")
        if not 0 < self.alpha < 1:
            return f"alpha={self.alpha!r} is not allowed; allowed: 0 < alpha < 1"
        if not GAMMA_RANGE[0] <= self.gamma <= GAMMA_RANGE[1]:
            return (f"gamma={self.gamma!r} is not allowed; allowed: {GAMMA_RANGE[0]:g} to {GAMMA_RANGE[1]:g} "
                    f"(Hwang-Shih-DeCani; -4 is O'Brien-Fleming-like, 1 Pocock-like)")
        if not 0 < self.futility < 1:
            return f"futility={self.futility!r} is not allowed; allowed: 0 < futility < 1 (a conditional power)"
        if self.pilot_seeds < 2:
            return f"pilot_seeds={self.pilot_seeds} is not allowed; allowed: 2 or more (a test needs the seeds' spread)"
        if self.max_seeds < self.pilot_seeds:
            return (f"max_seeds={self.max_seeds} is less than pilot_seeds={self.pilot_seeds}; "
                    f"allowed: max_seeds >= pilot_seeds")
        if self.max_seeds > MAX_LOOKS:
            return f"max_seeds={self.max_seeds} is not allowed; allowed: at most {MAX_LOOKS}"
        if self.futility_from < 2:
            return f"futility_from={self.futility_from} is not allowed; allowed: 2 or more"
        return ""

    def spent(self, alpha: float = None) -> dict:
        """{n: the α spent by look n} (cumulative), pilot_seeds..max_seeds."""
        alpha = self.alpha if alpha is None else float(alpha)
        n = np.arange(self.pilot_seeds, self.max_seeds + 1)
        return dict(zip(n.tolist(), spending(self.spending, n / self.max_seeds, alpha, self.gamma).tolist()))

    def thresholds(self, alpha: float = None) -> dict:
        """{n: a(n)}: reject at look n when the two-sided p <= a(n), at level ``alpha`` (default the
        design's). Cached; the first call for a level costs about a second."""
        alpha = self.alpha if alpha is None else float(alpha)
        table = _thresholds(self.spending, float(self.gamma), self.pilot_seeds, self.max_seeds, alpha, self.statistic)
        return dict(zip(range(self.pilot_seeds, self.max_seeds + 1), table))


    def unresolved(self, alpha: float = None) -> str:
        """Why the thresholds at level ``alpha`` cannot be simulated, in one line naming the smallest
        level that can (``smallest_level``), or "": a look whose α to spend is crossed by fewer than
        MIN_CROSSINGS of the seeds' PATHS null paths (its threshold would be 0, or a Monte Carlo
        guess). Arithmetic only: no simulation."""
        alpha = self.alpha if alpha is None else float(alpha)
        fewest = _fewest_crossings(self, alpha)
        if fewest >= MIN_CROSSINGS:
            return ""
        return (f"the level {alpha:.4g} leaves a look {fewest:.0f} of the thresholds' {PATHS:,} simulated null "
                f"paths to cross (at least {MIN_CROSSINGS:,} needed, or its threshold is 0 or a guess); the "
                f"smallest level that resolves is {self.smallest_level():.4g}")

    def smallest_level(self) -> float:
        """The smallest level at which every look is crossed by MIN_CROSSINGS of the PATHS null paths
        (the crossings grow with the level: bisection)."""
        low, high = 1e-12, 1.0
        for _ in range(80):
            mid = math.sqrt(low * high)
            low, high = (low, mid) if _fewest_crossings(self, mid) >= MIN_CROSSINGS else (mid, high)
        return high


def _fewest_crossings(design: Design, alpha: float) -> float:
    """The fewest null paths (of PATHS) whose first crossing a look of ``design`` spends at ``alpha``."""
    spent = np.array(list(design.spent(alpha).values()))
    return float(np.diff(spent, prepend=0.0).min() * PATHS)


DESIGN_SETTINGS = tuple(f.name for f in fields(Design))  # a state keeps them flat, beside the strategy's own


def design_of(settings: dict) -> Design:
    """The Design a sweep's settings (as its state keeps them) ran; other keys are ignored, and a
    setting the state predates is what it ran then (``OLDER``)."""
    given = {**OLDER, **settings}
    return Design(**{f.name: given[f.name] for f in fields(Design) if f.name in given})


def spending(kind: str, time, alpha: float, gamma: float = Design.gamma) -> np.ndarray:
    """The two-sided α spent by information time ``time`` (0..1), α/2 on each side: Hwang-Shih-DeCani
    (γ; γ = 0 is linear), or Lan-DeMets' O'Brien-Fleming-like 2 - 2Φ(z_{1-α/4}/√t) per side (as
    the published tables, ldbounds and gsDesign spend it) and Pocock-like α ln(1 + (e - 1) t)."""
    from scipy import special

    t = np.clip(np.asarray(time, dtype=float), 0.0, 1.0)
    if kind == "hsd":
        return alpha * t if gamma == 0 else alpha * np.expm1(-gamma * t) / np.expm1(-gamma)
    if kind == "obf":
        with np.errstate(divide="ignore"):
            return 4 * special.ndtr(-special.ndtri(1 - alpha / 4) / np.sqrt(t))
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1) * t)
    raise ValueError(f"spending={kind!r}; allowed: {', '.join(SPENDING)}")


@cache
def _thresholds(kind: str, gamma: float, pilot: int, most: int, alpha: float, statistic: str) -> tuple:
    looks = tuple(range(pilot, most + 1))
    spent = tuple(spending(kind, np.array(looks) / most, alpha, gamma).tolist())
    table = _crossings(looks, spent)   # the seeds-only t: the verdict's t without a shared part, exact
    if statistic == "verdict":         # each look's least favourable shared part
        for shared in shared_grid(pilot, most):
            table = tuple(map(min, table, _verdict_crossings(looks, spent, shared)))
    return table


def shared_grid(pilot: int, most: int) -> tuple:
    """The shared parts (in units of the seeds' variance σ²) whose crossings the verdict's thresholds
    take the least favourable of: halvings from 0.08 down to below 0.004·pilot/most. The excess of
    the seeds-only table peaks where the shared part is about 1-2% of σ² at the pilot's look and
    moves down as 1/n; from 0.08 up the verdict's t only needs larger thresholds
    (results/significance_calibration.md)."""
    out, shared = [], SHARED_TOP
    while shared >= SHARED_FLOOR * pilot / most:
        out.append(shared)
        shared /= 2
    out.append(shared)
    return tuple(out)


def _seed_sums(looks: tuple, paths: int, rng):
    """Yields ``(n, S, Q)`` of ``paths`` null sequences at each of the cumulative seed counts
    ``looks`` (σ = 1): the sum S of n seeds' differences and the sum of squares Q about their mean,
    block by block: a block of m seeds adds a normal sum B (variance m) and a chi-square(m - 1) sum
    of squares about its mean, and Q grows by n·m/(n+m)·(B/m - S/n)²."""
    n = looks[0]
    total = rng.standard_normal(paths) * math.sqrt(n)
    squares = rng.chisquare(n - 1, paths)
    for k, look in enumerate(looks):
        if k:
            m = look - n
            block = rng.standard_normal(paths) * math.sqrt(m)
            squares += (rng.chisquare(m - 1, paths) if m > 1 else 0.0) + n * m / (n + m) * (block / m - total / n) ** 2
            total += block
            n = look
        yield n, total, squares


def _paths(looks: tuple, paths: int = PATHS, seed: int = PATHS_SEED):
    """Yields |t| of the seeds' t for ``paths`` null sequences at each of the cumulative seed counts
    ``looks`` (σ = 1: the t's law is free of σ)."""
    for n, total, squares in _seed_sums(looks, paths, np.random.default_rng(seed)):
        yield np.abs(total) / math.sqrt(n) / np.sqrt(squares / (n - 1))


def _crossings(looks: tuple, spent: tuple, paths: int = PATHS, seed: int = PATHS_SEED) -> tuple:
    """Nominal two-sided p thresholds of the seeds' t-test at cumulative seed counts ``looks`` whose
    first crossings under the null spend ``spent`` (cumulative). The first is the plain t's; the
    rest by simulating ``paths`` null sequences (``_paths``)."""
    from scipy import special

    alive = np.ones(paths, dtype=bool)
    out, before = [], 0.0
    for k, (n, t) in enumerate(zip(looks, _paths(looks, paths, seed))):
        hits = round((spent[k] - before) * paths)
        before = spent[k]
        if k == 0:
            p = spent[0]
            critical = special.stdtrit(n - 1, 1 - p / 2)
        else:
            left = t[alive]
            if hits <= 0:
                critical, p = math.inf, 0.0
            else:
                critical = float(np.partition(left, len(left) - hits)[len(left) - hits])
                p = float(2 * special.stdtr(n - 1, -critical))
        alive &= t < critical
        out.append(float(p))
    return tuple(out)


def _verdict_paths(looks: tuple, shared: float, paths: int = VERDICT_PATHS, seed: int = PATHS_SEED):
    """Yields ``(|t|, s_n²/n)`` of the verdict's t for ``paths`` null sequences at each of the
    cumulative seed counts ``looks``: Δ_n = c + the mean of n seeds' differences (σ = 1), c ~ N(0,
    shared) drawn once per sequence (the one test set every seed is scored on), se_n² = s_n²/n +
    shared with the shared part taken as known."""
    rng = np.random.default_rng(seed)
    offset = rng.standard_normal(paths) * math.sqrt(shared)
    for n, total, squares in _seed_sums(looks, paths, rng):
        seed_part = squares / (n - 1) / n
        yield np.abs(offset + total / n) / np.sqrt(seed_part + shared), seed_part


def _verdict_crossings(looks: tuple, spent: tuple, shared: float, paths: int = VERDICT_PATHS,
                       seed: int = PATHS_SEED) -> tuple:
    """Nominal p thresholds of the verdict's t with a shared part ``shared`` (σ² = 1) at the
    cumulative seed counts ``looks`` whose first crossings under the null spend ``spent``. The p is
    the verdict's, with its guarded Welch-Satterthwaite df at endless sentences (the largest df, so
    the least favourable). It is computed only where it can reach the threshold: that df is at
    least n - 1, so p lies between the normal's tail and the t(n - 1)'s at the same |t|."""
    from scipy import special

    alive = np.ones(paths, dtype=bool)
    out, before = [], 0.0
    for k, (n, (t, seed_part)) in enumerate(zip(looks, _verdict_paths(looks, shared, paths, seed))):
        hits = round((spent[k] - before) * paths)
        before = spent[k]
        t = np.where(alive, t, 0.0)
        if not 0 < hits <= alive.sum():
            out.append(0.0)
            continue
        kth = float(np.partition(t, paths - hits)[paths - hits])     # the hits-th largest |t| alive
        bound = 2 * special.stdtr(n - 1, -kth)                        # the hits-th smallest p is at most this
        near = np.flatnonzero(t >= -special.ndtri(bound / 2))          # p <= bound needs a normal tail <= bound
        df = degrees_of_freedom(seed_part[near], shared, n, math.inf, guard_factor(n))
        p = 2 * special.stdtr(df, -t[near])
        threshold = float(np.partition(p, hits - 1)[hits - 1])
        alive[near[p <= threshold]] = False
        out.append(threshold)
    return tuple(out)


@cache
def _stagewise_tails(kind: str, gamma: float, pilot: int, most: int, alpha: float, n: int,
                     statistic: str) -> tuple:
    """For each null world the thresholds were simulated for (the seeds-only t's paths, and for the
    verdict's statistic the verdict's paths of each shared part of ``shared_grid``): ``(the share of
    paths that crossed a(j) at a look j < n, the sorted p at look n of the paths that did not)``.
    The same paths and seed as the thresholds' own Monte Carlo; each look's p is the statistic's."""
    from scipy import special

    looks = tuple(range(pilot, n + 1))
    table = _thresholds(kind, gamma, pilot, most, alpha, statistic)
    worlds = [(look, 2 * special.stdtr(look - 1, -t)) for look, t in zip(looks, _paths(looks))]
    out = [_tail(worlds, table, pilot, PATHS)]
    if statistic == "verdict":
        for shared in shared_grid(pilot, most):
            steps = []
            for look, (t, seed_part) in zip(looks, _verdict_paths(looks, shared)):
                df = degrees_of_freedom(seed_part, shared, look, math.inf, guard_factor(look))
                steps.append((look, 2 * special.stdtr(df, -t)))
            out.append(_tail(steps, table, pilot, VERDICT_PATHS))
    return tuple(out)


def _tail(steps, table, pilot: int, paths: int) -> tuple:
    """``(share crossed before the last step, sorted p of the rest at the last step)`` of ``steps``,
    ``[(look, p of every path)]``, against the thresholds ``table`` (from look ``pilot``)."""
    alive = np.ones(paths, dtype=bool)
    for look, p in steps[:-1]:
        alive &= p > table[look - pilot]
    return 1.0 - alive.mean(), np.sort(steps[-1][1][alive])


def stagewise_p(design: "Design", n: int, p: float, alpha: float = None) -> float:
    """The stage-wise ordering p of a row that stopped at look ``n`` with the verdict's p ``p``, at
    level ``alpha`` (its row's; Jennison & Turnbull 2000, §8.4): the null chance of a crossing at an
    earlier look and of reaching look n with a p at or below this one, on the paths of each null
    world the thresholds were simulated for (the seeds' t, and each shared part of the verdict's t),
    the largest over them: the pilot's look included, where the verdict's p alone is too small
    under a shared part. At most α when p <= a(n) (every world crosses at most α under the
    thresholds, the least of all worlds'); a row that did not cross gets at least α."""
    alpha = design.alpha if alpha is None else float(alpha)
    n, p = int(n), float(p)
    if n <= design.pilot_seeds and design.statistic == "seeds":
        return p   # the seeds-only t's p is exact at the first look
    tails = _stagewise_tails(design.spending, float(design.gamma), design.pilot_seeds, design.max_seeds, alpha, n,
                             design.statistic)
    worst = max(before + np.searchsorted(rest, p, side="right") / PATHS_OF[i > 0]
                for i, (before, rest) in enumerate(tails))
    crossed = p <= design.thresholds(alpha).get(n, -1.0)
    return float(min(worst, alpha) if crossed else max(worst, alpha))


PATHS_OF = {False: PATHS, True: VERDICT_PATHS}   # the seeds' paths, a shared part's


def null_stops(design: "Design", bounds: dict, shared: float, d: np.ndarray) -> tuple:
    """Where each of the simulated paths ``d`` (paths x max_seeds: each seed's difference, a test
    set's shared part of variance ``shared`` included) stops under ``bounds`` ({n: a(n)}) with the
    verdict's p, for calibrating what is reported at a stop: ``(stopping look, its p, crossed)`` per
    path, a path that never crosses stopping at the last look. Futility is non-binding: ignored."""
    from posenc.stats.verdict import p_values

    paths = len(d)
    stop, p_stop = np.zeros(paths, dtype=int), np.zeros(paths)
    crossed, going = np.zeros(paths, dtype=bool), np.ones(paths, dtype=bool)
    for n in range(design.pilot_seeds, design.max_seeds + 1):
        x = d[:, :n]
        p = p_values(x.mean(1), x.std(1, ddof=1), shared, shared, n, 1000)[0]
        hit = going & ((p <= bounds[n]) | (n == design.max_seeds))
        stop[hit], p_stop[hit], crossed[hit] = n, p[hit], p[hit] <= bounds[n]
        going &= ~hit
    return stop, p_stop, crossed


def median_unbiased(design: "Design", look: "Look", alpha: float = None, paths: int = 20_000) -> float:
    """The median-unbiased Δ under the stage-wise ordering (Jennison & Turnbull 2000, §8.5) of a row
    that stopped at ``look``: the θ at which an outcome at least as far in Δ's direction (a crossing
    that way at an earlier look, or reaching this look with a Δ at least this one) has chance 1/2.
    Normal theory with the stopping look's variance components taken as known (se_j² = spread/j +
    shared, each look's df as the verdict's); futility is non-binding and ignored, as in the
    thresholds. Common random numbers make it a smooth function of θ; seeded."""
    from scipy import optimize, special

    look = Look.coerce(look)
    if look.n <= design.pilot_seeds:   # no earlier look: Δ itself is median-unbiased
        return float(look.delta)
    spread, shared = look.components()
    alpha = design.alpha if alpha is None else float(alpha)
    table = design.thresholds(alpha)
    sign = 1.0 if look.delta >= 0 else -1.0
    rng = np.random.default_rng(PATHS_SEED)
    noise = (rng.standard_normal((paths, 1)) * math.sqrt(shared)
             + np.cumsum(rng.standard_normal((paths, look.n)) * math.sqrt(spread), 1) / np.arange(1, look.n + 1))
    bounds = []
    for j in range(design.pilot_seeds, look.n):
        se = math.sqrt(spread / j + shared)
        df = float(degrees_of_freedom(spread / j, shared, j, look.sentences)) if look.sentences else j - 1
        bounds.append((j, float(special.stdtrit(df, 1 - table[j] / 2)) * se))

    def beyond(theta: float) -> float:
        delta = sign * (theta + noise)            # each path's Δ_j, in the observed direction
        going = np.ones(paths, dtype=bool)
        crossed = np.zeros(paths, dtype=bool)
        for j, bound in bounds:
            crossed |= going & (delta[:, j - 1] > bound)
            going &= np.abs(delta[:, j - 1]) <= bound
        return float((crossed | (going & (delta[:, look.n - 1] >= sign * look.delta))).mean()) - 0.5

    width = 10 * math.sqrt(spread / design.pilot_seeds + shared) + abs(look.delta) + 1e-9
    low, high = look.delta - width, look.delta + width
    if beyond(low) * beyond(high) > 0:
        return math.nan
    return float(optimize.brentq(beyond, low, high, xtol=1e-4))


@dataclass(frozen=True)
class Look:
    """One look at a row: its paired seeds, Δ, se, df and p (the verdict's), the components that
    project se to other seed counts (spread: the variance of d_s over seeds, s_d²; shared: the test
    set's part; se² = spread/n + shared), and what ``decide`` made of it at the row's level."""
    n: int
    delta: float
    se: float
    df: float
    p: float
    spread: float = math.nan
    shared: float = math.nan
    sentences: int = 0
    threshold: float = math.nan
    cond_power: float = math.nan
    level: float = math.nan

    @classmethod
    def of(cls, test) -> "Look":
        """From a ``verdict.SeedTest`` (two or more seeds)."""
        return cls(int(test.n), float(test.delta), float(test.se), float(test.df), float(test.p),
                   float(test.sd_diff) ** 2, float(test.shared_var), int(test.sentences))

    @classmethod
    def coerce(cls, value) -> "Look":
        """A Look from a Look, a dict (its ``asdict``) or any object with n, delta, se, df, p."""
        if isinstance(value, cls):
            return value
        names = [f.name for f in fields(cls)]
        if isinstance(value, dict):
            return cls(**{k: value[k] for k in names if k in value})
        return cls(**{k: getattr(value, k) for k in names if hasattr(value, k)})

    def components(self) -> tuple:
        """(spread, shared); without them all of se² is taken as the seeds' part, which projects
        the smallest se to N (the largest conditional power: futility errs towards going on)."""
        if math.isnan(self.spread) or math.isnan(self.shared):
            return self.n * self.se ** 2, 0.0
        return self.spread, self.shared


def projected_se(look: Look, seeds: int) -> float:
    spread, shared = Look.coerce(look).components()
    return math.sqrt(spread / seeds + shared)


def _final(look: Look, design: Design, alpha: float):
    """(se at N, the critical |t| of the final look): the t at df projected to N seeds."""
    from scipy import special

    spread, shared = look.components()
    most = design.max_seeds
    se_n = math.sqrt(spread / most + shared)
    df = float(degrees_of_freedom(spread / most, shared, most, look.sentences)) if look.sentences else most - 1
    return se_n, float(special.stdtrit(df, 1 - design.thresholds(alpha)[most] / 2))


def conditional_power(look, design: Design, effect: float, alpha: float = None) -> float:
    """The chance that the row rejects at its N seeds' final look, given this look, if the truth is
    ``effect`` in the direction of this look's Δ (both tails counted)."""
    from scipy import special

    look = Look.coerce(look)
    se_n, critical = _final(look, design, alpha)
    if look.se == 0 or se_n == 0:     # outputs identical to the baseline's: nothing left to learn
        return float(look.delta != 0)
    info, info_n = 1 / look.se ** 2, 1 / se_n ** 2
    if info_n <= info * (1 + 1e-12):
        return float(abs(look.delta) / look.se > critical)
    theta = math.copysign(abs(effect), look.delta if look.delta else 1.0)
    mean = (look.delta * info + theta * (info_n - info)) / info_n
    sd = math.sqrt(info_n - info) / info_n
    bound = critical * se_n
    return float(special.ndtr((mean - bound) / sd) + special.ndtr((-bound - mean) / sd))


def could_find(look, design: Design, alpha: float = None, power: float = POWER) -> float:
    """The |Δ| that the row's N seeds would still find with probability ``power``, given this look
    (the near tail; the far one only adds): what a futility stop gives up."""
    from scipy import special

    look = Look.coerce(look)
    se_n, critical = _final(look, design, alpha)
    if look.se == 0 or se_n == 0:
        return math.inf
    info, info_n = 1 / look.se ** 2, 1 / se_n ** 2
    if info_n <= info * (1 + 1e-12):
        return math.inf
    sd = math.sqrt(info_n - info) / info_n
    return float(((critical * se_n + special.ndtri(power) * sd) * info_n - abs(look.delta) * info) / (info_n - info))


def sequential_power(design: Design, effect: float, spread: float, shared: float, sentences: int = 0,
                     alpha: float = None, paths: int = 20_000) -> float:
    """The design's power for ``effect`` at level ``alpha`` with a look at every n, futility aside
    (batches and futility lower it a little): d_s = effect + c + e_s with the shared part c and the
    seeds' spread e_s, each look's |Δ|/se against its threshold's t with the df that look would
    have. A seeded Monte Carlo of ``paths`` sweeps (sd <= 0.004)."""
    from scipy import special

    rng = np.random.default_rng(PATHS_SEED)
    most = design.max_seeds
    means = np.cumsum(rng.standard_normal((paths, most)) * math.sqrt(spread), 1) / np.arange(1, most + 1)
    delta = abs(effect) + rng.standard_normal((paths, 1)) * math.sqrt(shared) + means
    rejected = np.zeros(paths, dtype=bool)
    for n, a in design.thresholds(alpha).items():
        se = math.sqrt(spread / n + shared)
        if se == 0:
            return float(effect != 0)
        df = float(degrees_of_freedom(spread / n, shared, n, sentences)) if sentences else n - 1
        rejected |= np.abs(delta[:, n - 1]) > special.stdtrit(df, 1 - a / 2) * se
    return float(rejected.mean())


def reachable(design: Design, effect: float, spread: float, shared: float, sentences: int = 0,
              alpha: float = None, target: float = POWER) -> bool:
    """Whether N seeds can find ``effect`` with power ``target`` (``sequential_power``): where not,
    the test set's shared part or max_seeds caps it, and the sweeper says so before spending seeds."""
    return sequential_power(design, effect, spread, shared, sentences, alpha) >= target


@dataclass(frozen=True)
class Decision:
    stopped: str            # "" while the row goes on; EFFICACY, FUTILITY or MAX
    why: str                # as the table shows it: "efficacy at 3 seeds", "futility at 5 seeds: ...", "max_seeds"
    verdict: str            # BETTER, WORSE or NO_EVIDENCE once stopped; "" while going on
    look: Look              # the look it stopped at (or the latest, while going on)
    ci: tuple = field(default=(math.nan, math.nan))   # repeated confidence interval at that look, at ci_level
    level: float = math.nan                             # the α the row was tested at
    ci_level: float = math.nan                          # the α of its interval: α/m, fixed before the pilot

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Decision":
        return cls(data["stopped"], data["why"], data["verdict"], Look.coerce(data["look"]),
                   tuple(data.get("ci", (math.nan, math.nan))), float(data.get("level", math.nan)),
                   float(data.get("ci_level", math.nan)))


def repeated_ci(look: Look, threshold: float) -> tuple:
    """Δ ± t(1 - a/2, df)·se with ``threshold`` a = a(n) at a level fixed in advance: the intervals
    that cover the truth at every look at once with probability 1 - that level, whatever the
    stopping rule (Jennison & Turnbull, ch. 9). At a level that depends on the data (Holm's passing
    on) they do not: ``decide`` gives every row's at α/m."""
    from scipy import special

    if not 0 < threshold < 1 or look.df < 1:
        return (math.nan, math.nan)
    half = float(special.stdtrit(look.df, 1 - threshold / 2)) * look.se
    return (look.delta - half, look.delta + half)


def _judged(look: Look, design: Design, effect: float, level: float) -> Look:
    table = design.thresholds(level)
    threshold = table.get(look.n, math.nan)
    power = conditional_power(look, design, effect, level) if look.n in table else math.nan  # se = 0 included
    return Look(**{**asdict(look), "threshold": threshold, "cond_power": power, "level": level})


def decide(design: Design, effect: float, rows: dict, frozen: dict = None) -> dict:
    """{name: Decision} for the m rows of one family (sharing a baseline); see the module docstring."""
    frozen = {k: (v if isinstance(v, Decision) else Decision.from_dict(v)) for k, v in (frozen or {}).items()}
    looks = {name: sorted((Look.coerce(x) for x in seen), key=lambda x: x.n) for name, seen in rows.items()}
    names = list(dict.fromkeys([*looks, *frozen]))
    out = dict(frozen)
    rejected = _rejections(design, effect, names, looks, out)
    level = design.alpha / max(len(names) - len(rejected), 1)
    interval = interval_of(design, len(names))
    for name in names:
        if name in out:
            continue
        if not looks.get(name):
            out[name] = Decision("", "", "", Look(0, math.nan, math.nan, math.nan, math.nan), level=level,
                                 ci_level=design.alpha / len(names))
            continue
        look = _judged(looks[name][-1], design, effect, level)
        if look.n >= design.max_seeds:
            out[name] = Decision(MAX, MAX, NO_EVIDENCE, look, level=level, **interval(look))
        elif look.n >= max(design.futility_from, design.pilot_seeds) and look.cond_power < design.futility:
            found = could_find(look, design, level)
            out[name] = Decision(FUTILITY, f"futility at {look.n} seeds: conditional power {look.cond_power:.2f} at "
                                 f"Δ = {abs(effect):g}; its {design.max_seeds} seeds could still have found "
                                 f"|Δ| >= {found:.2f}", NO_EVIDENCE, look, level=level, **interval(look))
        else:
            out[name] = Decision("", "", "", look, level=level, **interval(look))
    return out


def interval_of(design: Design, rows: int):
    """``interval(look) -> {ci, ci_level}``, a Decision's interval for a row of a family of ``rows``: the
    repeated CI at α/rows."""
    ci_level = design.alpha / rows
    table = design.thresholds(ci_level)

    def interval(look: Look) -> tuple:
        return {"ci": repeated_ci(look, table.get(look.n, math.nan)), "ci_level": ci_level}
    return interval


def _rejections(design: Design, effect: float, names: list, looks: dict, out: dict) -> set:
    """Graphical Holm's rejections: each round tests the open rows at α / (rows not rejected) at every
    look they have had; a row's first crossing is its efficacy Decision (into ``out``). The rows
    rejected, frozen ones included."""
    rejected = {k for k, d in out.items() if d.stopped == EFFICACY}
    interval = interval_of(design, len(names))
    while len(rejected) < len(names):  # (a family whose rows have all rejected has no α left to pass on)
        level = design.alpha / (len(names) - len(rejected))
        table = design.thresholds(level)
        crossed = {}
        for name in names:
            if name in out or not looks.get(name):
                continue
            hits = [x for x in looks[name] if x.n in table and x.p <= table[x.n]]
            if hits:   # the first crossing: the stage-wise ordering and the median-unbiased Δ assume none before it
                crossed[name] = hits[0]
        for name, look in crossed.items():
            look = _judged(look, design, effect, level)
            out[name] = Decision(EFFICACY, f"efficacy at {look.n} seeds", BETTER if look.delta > 0 else WORSE, look,
                                 level=level, **interval(look))
        rejected |= set(crossed)
        if not crossed:
            break
    return rejected
