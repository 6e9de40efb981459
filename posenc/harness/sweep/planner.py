"""The seeds strategy's planner, with no Hydra in it: given the grid's rows, the sweep as it stands
(``posenc.cells.sweep.read_sweep``) and the state so far, it takes each row's look, decides by the
group sequential design (``posenc.stats.sequential``) and says which cells to launch next. The
Hydra sweeper (``posenc.harness.sweep.seeds``) only turns its answer into launches.

Each look is the verdict's own test of a row against its baseline (the report's ``SeedTest``: Δ,
se, df, p over the paired seeds), taken once at each number of paired seeds the row reaches: after
the pilot and after every batch. Its fields go into the state, so a rerun never takes a look
again, and takes the same decisions: the thresholds a(n) are fixed by the design before the pilot
(a rerun with other design settings is refused), a stopped row's verdict is frozen, and only
decisions of rows still open can change (graphical Holm passes a rejected row's α on).

Batch sizes come from ``batch_seeds``, never from Δ; the planned effect enters only the futility
rule's conditional power, never a rejection. A baseline runs the seeds of every row still open
against it.
"""

import math
from dataclasses import dataclass, field, replace

from posenc.cells.record import is_ok
from posenc.cells.rows import baseline_of, row_name, varying
from posenc.cells.strategy import SeedsRow, SeedsSettings, SeedsState, StateCell, design_hash
from posenc.harness.sweep.config import SEEDS_SETTINGS, seeds_settings
from posenc.report.rows import Settings, baselines, parse_baseline
from posenc.report.table import reports_of
from posenc.stats import sequential
from posenc.stats.verdict import NO_EVIDENCE

SEED = "seed"
BASELINE_STOP = "baseline"
# Stops the planner sees before the design (a row's cells, not its comparison):
UNTESTABLE = "untestable"      # its pilot finished, but the report cannot compare it with its baseline
CELLS_FAILED = "cells failed"  # not enough of its cells finished to reach the seeds it wants
DESIGN_STOPS = (sequential.EFFICACY, sequential.FUTILITY, sequential.MAX)  # frozen; the sweeper's own stops too


class StrategyError(ValueError):
    """Settings or a command the strategy cannot run; one line."""


def settings_problem(settings: SeedsSettings) -> str:
    """What is wrong with the settings, in one line naming the value and what is allowed, or ""."""
    for name in ("pilot_seeds", "max_seeds"):  # before the design's own checks, which compare them
        value = getattr(settings.design, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{name}={value!r} is not allowed; allowed: a whole number >= 2"
    problem = settings.design.problem()
    if problem:
        return problem
    batch = settings.batch_seeds
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        return f"batch_seeds={batch!r} is not allowed; allowed: a whole number >= 1"
    try:
        effect = float(settings.effect)
    except (TypeError, ValueError):
        effect = -1.0
    if not effect > 0 or isinstance(settings.effect, bool):
        return f"effect={settings.effect!r} is not allowed; allowed: a BLEU difference > 0"
    size = settings.test_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        return (f"test_size={size!r} is not allowed; "
                "allowed: null (the sweep's own test set) or a number of sentences >= 1")
    try:
        parse_baseline(str(settings.baseline))
    except ValueError as err:
        return f"baseline: {err}"
    return ""


def checked_settings(given: dict) -> SeedsSettings:
    """``SeedsSettings`` of the settings given over the defaults; StrategyError naming the first bad one."""
    settings = SeedsSettings.of(seeds_settings(given))
    problem = settings_problem(settings)
    if problem:
        raise StrategyError(f"hydra.sweeper.{problem}")
    return settings


def new_design_check(design: sequential.Design, rows: int) -> None:
    """StrategyError for a design a new sweep must not start with: the seeds-only table (too
    permissive for the verdict's t: up to 1.16 times α/5), or a level α/m (``rows``: the largest
    family) whose thresholds the simulation cannot resolve. A sweep that started so resumes as it ran."""
    if design.statistic == "seeds":
        raise StrategyError("hydra.sweeper.statistic=seeds is the seeds-only table of sweeps started before "
                            "2026-12-03, too permissive for the verdict's t (up to 1.16 times its level at α/5); "
                            "allowed for a new sweep: statistic=verdict")
    problem = design.unresolved(design.alpha / rows)
    if problem:
        raise StrategyError(f"hydra.sweeper.alpha={design.alpha!r} over {rows} rows sharing a baseline: {problem}; "
                            f"allowed: alpha >= {design.smallest_level() * rows:.4g} for {rows} rows, fewer rows, "
                            "or fewer looks")


def report_settings(settings) -> Settings:
    """The report's settings for a seeds strategy's settings (``SeedsSettings``, or an old rule's):
    the table, its power section and every look use the strategy's baseline, effect and test size."""
    return Settings(baseline=parse_baseline(str(settings.baseline)), power=True, effect=float(settings.effect),
                    test_size=settings.test_size)


@dataclass(frozen=True)
class Launch:
    """One cell a planner asks the launcher for: its overrides, and how the log names it (a cell
    running is ``posenc.harness.app.Job``, Hydra's side of it)."""
    label: str
    overrides: list


@dataclass
class PlannedRow:
    """A row as the planner drives it: its state (what the state file keeps) and what this run
    knows besides (its baseline row, the seeds it launched, its cells' directories)."""
    state: SeedsRow
    base: "PlannedRow" = None                   # its baseline row (None for a baseline)
    tried: set = field(default_factory=set)     # seeds launched by this run
    dirnames: dict = field(default_factory=dict)  # seed -> its cell's directory

    @property
    def label(self) -> str:
        return self.state.row

    @property
    def overrides(self) -> list:
        return self.state.overrides

    @property
    def baseline(self) -> bool:
        return self.state.baseline


class SeedsPlanner:
    """``next_batch(sweep)`` after every batch; ``state()`` for the state file.
    ``name(overrides) -> dirname`` names a cell as the launcher will (Hydra's override_dirname)."""

    def __init__(self, settings: SeedsSettings, rows: list, name, before: SeedsState = None):
        self.settings, self.rows, self.name = settings, rows, name
        self.report_settings = report_settings(settings)
        self.adopted = list(before.adopted) if before is not None else []   # cells its first look took as found
        # the design's hash, fixed at the first launch (a state older than the hash keeps none)
        self.design = before.design if before is not None else design_hash(settings, [r.state for r in rows])
        if before is not None:
            self.resume(before)

    # --- the rows --------------------------------------------------------------------------------

    @classmethod
    def for_grid(cls, settings: SeedsSettings, jobs: list, name, before: SeedsState = None) -> "SeedsPlanner":
        """The grid's rows (each job's overrides without seed), each with its baseline row."""
        base_key, base_value = parse_baseline(str(settings.baseline))
        rows = []
        for job in jobs:
            values = dict(line.split("=", 1) for line in job)
            rows.append(PlannedRow(SeedsRow(row_label(job, jobs), list(job),
                                     baseline=str(values.get(base_key, "")) == str(base_value))))
        link_baselines(rows, base_key, base_value)
        planner = cls(settings, rows, name, before)  # a rerun's changed design or family is named first
        if not any(r.base is not None for r in rows):
            raise StrategyError(f"hydra.sweeper.baseline={base_key}={base_value}: no row of the sweep is compared "
                                f"with a {base_key}={base_value} row; allowed: a grid with a baseline row and rows "
                                f"that differ from it in {base_key} (e.g. placement=both,none)")
        if before is None:   # a new sweep: only a design whose thresholds hold and can be simulated
            new_design_check(settings.design, max(len(f) for f in planner.families()))
        return planner

    def resume(self, before: SeedsState) -> None:
        """Take the looks and decisions of an earlier run of this sweep; refuse a changed design."""
        if before.old_rule:
            raise StrategyError("this sweep directory was started by the seeds strategy's old rule (min_seeds, "
                                "plans from the seeds' spread); allowed: a new hydra.sweep.dir for the group "
                                "sequential design")
        for key in sequential.DESIGN_SETTINGS:  # a state that predates a setting ran what OLDER says
            was, now = getattr(before.settings.design, key), getattr(self.settings.design, key)
            if was != now:
                why = sequential.OLDER_WHY.get(key) if key in before.settings.predates else None
                older = f" ({why})" if why else ""
                raise StrategyError(f"hydra.sweeper.{key}={now!r} differs from {was!r}, with which this sweep started"
                                    f"{older} (its thresholds depend on it); allowed: {key}={was!r}, or a new "
                                    f"hydra.sweep.dir")
        check_family(before, self.settings, self.rows)
        kept = {tuple(r.overrides): r for r in before.rows}
        for row in self.rows:
            row.state = replace(kept[tuple(row.overrides)], baseline=row.baseline)
        for family in self.families():
            for row in family:
                relabel(row.state, self.settings.design, len(family))

    # --- one step ------------------------------------------------------------------------------------

    @property
    def seed_limit(self) -> int:
        """The highest seed number a row may reach, failed cells included: no endless retrying."""
        return 2 * self.settings.design.max_seeds + self.settings.design.pilot_seeds

    def dirname(self, row: PlannedRow, seed: int) -> str:
        if seed not in row.dirnames:
            row.dirnames[seed] = self.name(row.overrides + [f"{SEED}={seed}"])
        return row.dirnames[seed]

    def next_jobs(self, sweep) -> list:
        """``next_batch`` as the launcher takes it: a ``Launch`` per cell."""
        return [Launch(f"{row.label} seed={seed}", row.overrides + [f"{SEED}={seed}"])
                for row, seed in self.next_batch(sweep)]

    @staticmethod
    def batch_words(count: int) -> str:
        """How the log introduces a batch of ``count`` cells."""
        return f"seeds strategy: batch of {count}"

    def next_batch(self, sweep) -> list:
        """``[(row, seed), ...]`` to run next, from the sweep as read; [] when every row stopped."""
        ok = {c.name for c in sweep.cells if is_ok(c.record)}
        for row in self.rows:
            row.state.seeds = [s for s in range(1, self.seed_limit + 1) if self.dirname(row, s) in ok]
        tests = self.tests(sweep)
        self.look(tests)
        return self.wanted()

    def tests(self, sweep) -> dict:
        """``{id(row): SeedTest or why not}`` from the report of the sweep as it stands, for the
        compared rows that have cells."""
        if not sweep.cells:
            return {}
        settings = replace(self.report_settings, power=False, sentence_test=False)  # a look needs neither
        own = {name for row in self.compared() for name in row.dirnames.values()}
        taken = {self.dirname(row, s) for row in self.compared() for s in self.looked_at(row)}
        cells = [c for c in sweep.cells if c.name not in own or c.name in taken]
        (report,) = reports_of([replace(sweep, cells=cells)], settings)
        by_dir = {name: row for row in self.rows for name in row.dirnames.values()}
        bases = baselines(report.rows, settings.baseline)
        out = {}
        for report_row in report.rows:
            mine = {id(by_dir[c.name]) for c in report_row.cells if c.name in by_dir}
            if len(mine) != 1 or bases[id(report_row)] in (None, report_row):
                continue
            test = report_row.tests.get(("bleu", "test"))
            if test is None:  # why not, in the table's words
                comparison, verdict = report_row.comparisons.get("test"), report_row.verdicts.get(("bleu", "test"))
                test = (comparison.p_note if comparison else "") or str(verdict.verdict if verdict else "") \
                    or "no comparison"
            out[mine.pop()] = test
        return out

    def look(self, tests: dict) -> None:
        """A look for every open row with more paired seeds than at its last look (the pilot at
        least), then the design's decisions for each family of rows sharing a baseline."""
        design, effect = self.settings.design, float(self.settings.effect)
        for family in self.families():
            for row in family:
                if not row.state.stopped:
                    self.take_look(row, tests.get(id(row)), design.alpha / len(family))
            if all(r.state.stopped for r in family):  # every decision taken: nothing left to decide
                continue
            looks = {r.label: r.state.looks for r in family}  # a row without a look yet still counts in m
            # Every stopped row is frozen: a row stopped untestable or for failed cells is a non-rejection,
            # whose stored looks must never pass α on.
            frozen = {r.label: decision_of(r.state) for r in family if r.state.stopped}
            decisions = sequential.decide(design, effect, looks, frozen)
            for r in family:
                d = decisions.get(r.label)
                if d is None or r.label in frozen or not r.state.looks:
                    continue
                at = next(i for i, x in enumerate(r.state.looks) if x.n == d.look.n)
                r.state.looks[at] = d.look  # the look as judged: its threshold and conditional power
                r.state.stopped, r.state.why, r.state.verdict = d.stopped, d.why, d.verdict
                r.state.stop_n = d.look.n if d.stopped else None  # the one look the table and the summary show
                r.state.ci, r.state.level, r.state.ci_level = (list(d.ci), d.level, d.ci_level) if d.stopped \
                    else (None, None, None)

    def take_look(self, row: PlannedRow, test, level: float) -> None:
        """The row's look at its paired seeds, if it has more than at its last look (the pilot at
        least); a row its report cannot test stops as untestable. ``level``: its family's α/m."""
        design = self.settings.design
        n, last = len(self.looked_at(row)), (row.state.looks[-1].n if row.state.looks else 0)
        if n < design.pilot_seeds or n <= last:
            return
        if not hasattr(test, "delta"):
            row.state.stopped, row.state.why = UNTESTABLE, test or "no comparison with its baseline"
            return
        if len(row.state.look_seeds) == len(row.state.looks):  # a state before issue 49 kept none: it gets none
            row.state.look_seeds.append(sorted(self.looked_at(row), key=float))
        row.state.looks.append(sequential.Look.of(test))
        if len(row.state.looks) == 1:
            row.state.unreachable = unreachable(test, design, float(self.settings.effect), level)

    def wanted(self) -> list:
        """The cells the open rows need for their next look, their baselines' included."""
        design, limit = self.settings.design, self.seed_limit
        wanted = {id(row): set() for row in self.rows}
        for row in self.compared():
            if row.state.stopped:
                continue
            paired = self.paired(row)
            have = len(paired)
            target = design.pilot_seeds if have < design.pilot_seeds else \
                min(have + self.settings.batch_seeds, design.max_seeds)
            seeds = [s for s in range(1, limit + 1) if s in paired or s not in row.tried][:target]
            if len(seeds) < target:
                row.state.stopped, row.state.why = CELLS_FAILED, f"its cells failed: {have} paired seeds of {target}"
                continue
            wanted[id(row)].update(s for s in seeds if s not in row.state.seeds)
            wanted[id(row.base)].update(s for s in seeds if s not in row.base.state.seeds)
        for base in (r for r in self.rows if r.baseline):
            users = [r for r in self.rows if r.base is base]
            base.state.stopped = "" if any(not r.state.stopped for r in users) else BASELINE_STOP
            base.state.why = "runs while any of its rows runs"
        batch = [(row, seed) for row in self.rows for seed in sorted(wanted[id(row)]) if seed not in row.tried]
        for row, seed in batch:
            row.tried.add(seed)
        return batch

    # --- helpers ---------------------------------------------------------------------------------------

    def compared(self) -> list:
        return [r for r in self.rows if r.base is not None]

    def families(self) -> list:
        out = {}
        for row in self.compared():
            out.setdefault(id(row.base), []).append(row)
        return list(out.values())

    @staticmethod
    def paired(row: PlannedRow) -> list:
        return [s for s in row.state.seeds if s in row.base.state.seeds]

    def looked_at(self, row: PlannedRow) -> list:
        """The paired seeds a look at ``row`` takes: the first max_seeds of them (a failed seed that a
        rerun retries after its substitute finished must not carry a look past N)."""
        return self.paired(row)[:self.settings.design.max_seeds]

    def state(self) -> SeedsState:
        """The plan as it stands: every cell a row has finished or this run launched, each row's looks and stop."""
        cells = [StateCell(self.dirname(row, s), row.overrides + [f"{SEED}={s}"])
                 for row in self.rows for s in sorted(set(row.state.seeds) | row.tried)]
        return SeedsState(self.settings, [row.state for row in self.rows], cells, adopted=self.adopted,
                          design=self.design)


def family_change(before: SeedsState, settings: SeedsSettings, rows: list) -> str:
    """What a rerun changes in the family its state fixed (the rows with their overrides, the
    baseline, the planned effect), in words, or "". Dropping a row would retest the others at
    α/(m - 1), adding one would leave m + 1 rows under α/m, and a new baseline or effect would mix
    looks against two comparators or two futility rules."""
    if not before.rows:  # a tune sweep stopped before its seeds began: no family fixed yet
        return ""
    # Rows are matched by their overrides: a label names a row by the keys the grid varies, so
    # dropping one row can rename the others.
    was = {tuple(r.overrides): r.row for r in before.rows}
    now = {tuple(r.overrides): r.label for r in rows}
    dropped = {was[key]: key for key in was if key not in now}
    added = {now[key]: key for key in now if key not in was}
    changes = [f"row {label}'s overrides changed from {' '.join(dropped[label])} to {' '.join(added[label])}"
               for label in dropped if label in added]
    changes += [f"row {label} dropped" for label in dropped if label not in added]
    changes += [f"row {label} added" for label in added if label not in dropped]
    given = before.settings
    if str(given.baseline) != str(settings.baseline):
        changes.append(f"hydra.sweeper.baseline={settings.baseline} differs from {given.baseline}")
    if given.effect is not None and float(given.effect) != float(settings.effect):
        changes.append(f"hydra.sweeper.effect={float(settings.effect):g} differs from {float(given.effect):g}")
    return "; ".join(changes)


def check_family(before: SeedsState, settings: SeedsSettings, rows: list) -> None:
    changed = family_change(before, settings, rows)
    if changed:
        raise StrategyError(f"{changed}: the rows, the baseline and the planned effect were fixed when this sweep's "
                            f"pilot started (Holm's α/m and every look rest on them); allowed: the same command, "
                            f"or a new hydra.sweep.dir")


def decision_of(row: SeedsRow):
    """A stopped row's frozen decision, as the design returned it; a row stopped by the sweeper
    (untestable, failed cells) as a non-rejection."""
    look = row.stop_look()
    look = sequential.Look(0, math.nan, math.nan, math.nan, math.nan) if look is None else look
    return sequential.Decision(row.stopped, row.why, row.verdict or NO_EVIDENCE, look,
                               tuple(row.ci) if row.ci else (math.nan, math.nan),
                               math.nan if row.level is None else row.level,
                               math.nan if row.ci_level is None else row.ci_level)


def relabel(row: SeedsRow, design, rows: int) -> None:
    """A row a state before issue 60 stopped, its repeated CI at the level passed on to it: its
    interval again at α/``rows`` (its family's size), the level its coverage holds at."""
    look = row.stop_look()
    if row.stopped in DESIGN_STOPS and row.ci_level is None and look is not None and look.n:
        interval = sequential.interval_of(design, rows)(look)
        row.ci, row.ci_level = list(interval["ci"]), interval["ci_level"]


def unreachable(test, design, effect: float, level: float) -> str:
    """Where the design cannot reach its power at ``effect`` at the row's level (its family's α/m)
    on this test set, as the pilot estimates the variance (the test set's own sampling or max_seeds
    caps it), the warning the table and the summary give before more seeds are spent; else ""."""
    look = sequential.Look.of(test)
    best = sequential.sequential_power(design, effect, look.spread, look.shared, look.sentences, level)
    if best >= sequential.POWER:
        return ""
    return (f"cannot reach {sequential.POWER:.0%} power at |Δ| = {effect:g}: at most {best:.2f} at α {level:.4g} "
            f"with max_seeds = {design.max_seeds} on this test set, as the pilot estimates its variance")


def grid_values(job) -> dict:
    """A job's ``key=value`` lines as a dict (``+``/``~`` dropped from the keys)."""
    return {k.lstrip("+~"): v for k, v in (line.split("=", 1) for line in job)}


def row_label(job, jobs) -> str:
    """A row's name: the values of the keys the grid's ``jobs`` vary, e.g. ``placement=none``."""
    return row_name(grid_values(job), varying([grid_values(j) for j in jobs]))


def link_baselines(rows, base_key: str, base_value, grid=None) -> None:
    """Set each compared row's ``base``: its baseline row (``posenc.cells.rows.baseline_of``, as the
    report finds it). ``grid(row)``: the overrides that make a row (default: all of its overrides)."""
    values = [grid_values(grid(row) if grid else row.overrides) for row in rows]
    bases = baseline_of(values, base_key.lstrip("+~"), base_value)
    for row, index in zip(rows, bases):
        row.base = None if row.baseline or index is None else rows[index]


def value_in(job, key):
    """The value a job's ``key=value`` lines give ``key`` (None without one)."""
    return next((line.split("=", 1)[1] for line in job if line.split("=", 1)[0] == key), None)


__all__ = ["SEEDS_SETTINGS", "Launch", "PlannedRow", "SeedsPlanner", "SeedsSettings", "StrategyError",
           "checked_settings", "report_settings"]
