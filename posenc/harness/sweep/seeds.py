"""``hydra/sweeper=posenc_seeds``: a sweep that sizes each row's seeds by the verdict's own plan.

The rows are the sweep's grid without ``seed`` (the preset's ``hydra.sweeper.params`` and the
command line, as Hydra's basic sweeper reads them). Every row first runs ``pilot_seeds`` seeds;
after each batch the sweep is read (``posenc.cells.sweep``), the report plans each row's
comparison with its baseline from the variance of the seeds it has (``posenc.stats.power``,
the number to book), and ``posenc.stats.seeds.SeedsRule`` says how many seeds each row runs
next. The observed difference never enters. A baseline row runs the seeds of every row compared
with it (the test pairs seeds). Batches go through whatever launcher is configured; every job is
an ordinary cell (its directory ``...,seed=N``, record, hashes, resume, W&B run).

Its state, in the sweep directory (``posenc.cells.plan.STRATEGY_FILE``), is the cells launched so
far and each row's seeds and stop: the sweep's plan for every reader. It is written before each
batch is launched. Nothing else is kept: a rerun of the same command reads the records again,
decides the same way, and launches only cells that are not finished (a cell in flight when the
sweeper was killed resumes from its checkpoint; the per-cell lock keeps two runs off one cell).
"""

import logging
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic
from posenc.cells.plan import PLAN_FILE, STRATEGY_FILE, override_dirname, sweep_jobs
from posenc.cells.record import is_ok
from posenc.cells.sweep import read_sweep
from posenc.harness.run.signals import STOP
from posenc.harness.sweep.launching import LaunchingSweeper
from posenc.report.rows import Settings, baselines, parse_baseline
from posenc.report.table import reports_of
from posenc.stats.power import DEFAULT_EFFECT, MAX_SEEDS
from posenc.stats.seeds import CELLS_FAILED, UNTESTABLE, SeedsRule

log = logging.getLogger(__name__)
SEED = "seed"


class StrategyError(ValueError):
    """Settings or a command the seeds strategy cannot run; one line."""


@dataclass
class RowState:
    overrides: list                 # the row's overrides (every job's, without seed)
    label: str                      # its swept values, e.g. placement=none
    baseline: bool = False          # the row others are compared with
    base: "RowState" = None         # its baseline row (None for a baseline)
    ok_seeds: list = field(default_factory=list)
    tried: set = field(default_factory=set)     # seeds launched by this run
    stopped: str = ""
    why: str = ""
    planned: object = None          # the report's seeds_needed
    dirnames: dict = field(default_factory=dict)  # seed -> its cell's directory (Hydra's parser is slow)

    def dirname(self, seed: int, naming, parser) -> str:
        if seed not in self.dirnames:
            self.dirnames[seed] = override_dirname(parser.parse_overrides(self.overrides + [f"{SEED}={seed}"]), naming)
        return self.dirnames[seed]


class SeedsSweeper(LaunchingSweeper):
    def __init__(self, params=None, effect: float = DEFAULT_EFFECT, pilot_seeds: int = 3, max_seeds: int = 10,
                 batch_seeds: int = 2, test_size=None, baseline: str = "placement=both", min_seeds: int = 7):
        self.params = dict(params or {})
        self.effect, self.test_size, self.baseline_text = effect, test_size, baseline
        self.rule = SeedsRule(pilot_seeds, max_seeds, batch_seeds, min_seeds)

    def sweep(self, arguments):
        try:
            settings = self.settings()
            rows = self.rows(arguments, settings)
        except StrategyError as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / PLAN_FILE)
        parser = OverridesParser.create()
        naming = self.config.hydra.job.config.override_dirname
        returns = []
        while not STOP.requested:
            batch = self.next_batch(rows, sweep_dir, settings, naming, parser)
            for row, seed in batch:
                row.tried.add(seed)
            self.write_state(sweep_dir, rows, naming, parser)  # the plan names the batch before it runs
            if not batch:
                break
            jobs = [row.overrides + [f"{SEED}={seed}"] for row, seed in batch]
            log.info(f"seeds strategy: batch of {len(jobs)}: "
                     + "; ".join(f"{row.label} seed={seed}" for row, seed in batch))
            returns.append(self.launch(jobs))
        return returns

    # --- what the strategy is asked ----------------------------------------------------------------

    def settings(self) -> Settings:
        problem = self.rule.problem()
        if problem:
            raise StrategyError(f"hydra.sweeper.{problem}")
        try:
            effect = float(self.effect)
        except (TypeError, ValueError):
            effect = -1.0
        if not effect > 0:
            raise StrategyError(f"hydra.sweeper.effect={self.effect!r} is not allowed; allowed: a BLEU difference > 0")
        if self.test_size is not None and (isinstance(self.test_size, bool) or not isinstance(self.test_size, int)
                                           or self.test_size < 1):
            raise StrategyError(f"hydra.sweeper.test_size={self.test_size!r} is not allowed; "
                                "allowed: null (the sweep's own test set) or a number of sentences >= 1")
        try:
            parse_baseline(str(self.baseline_text))
        except ValueError as err:
            raise StrategyError(f"hydra.sweeper.baseline: {err}") from None
        return strategy_settings(self.state_settings())

    def state_settings(self) -> dict:
        """The strategy's settings as its state keeps them."""
        return {"effect": float(self.effect), "test_size": self.test_size, "baseline": str(self.baseline_text),
                "pilot_seeds": self.rule.pilot_seeds, "max_seeds": self.rule.max_seeds,
                "batch_seeds": self.rule.batch_seeds, "min_seeds": self.rule.min_seeds}

    def rows(self, arguments, settings) -> list:
        """The grid's rows (every job's overrides without seed), each with its baseline row."""
        parser = OverridesParser.create()
        swept_here = [o for o in parser.parse_overrides(list(arguments)) if o.get_key_element() == SEED]
        if swept_here:
            raise StrategyError(f"{swept_here[0].input_line}: the seeds strategy chooses the seeds itself; "
                                "allowed: no seed on the command line (set hydra.sweeper.pilot_seeds, max_seeds)")
        preset = [f"{k}={v}" for k, v in self.params.items() if k != SEED]
        if SEED in self.params:
            log.info(f"seeds strategy: the preset's seed={self.params[SEED]} is replaced by the seeds "
                     "each row's plan asks for")
        jobs = sweep_jobs(parser.parse_overrides(preset + list(arguments)))
        base_key, base_value = settings.baseline
        rows = []
        for job in jobs:
            values = dict(line.split("=", 1) for line in job)
            rows.append(RowState(list(job), row_label(job, jobs),
                                 baseline=str(values.get(base_key, "")) == str(base_value)))
        link_baselines(rows, base_key)
        compared = [r for r in rows if r.base is not None]
        if not compared:
            raise StrategyError(f"hydra.sweeper.baseline={base_key}={base_value}: no row of the sweep is compared "
                                f"with a {base_key}={base_value} row; allowed: a grid with a baseline row and rows "
                                f"that differ from it in {base_key} (e.g. placement=both,none)")
        return rows

    # --- deciding each batch -------------------------------------------------------------------------

    @property
    def seed_limit(self) -> int:
        """The highest seed number a row may reach, failed cells included: no endless retrying."""
        return 2 * self.rule.max_seeds + self.rule.pilot_seeds

    def next_batch(self, rows, sweep_dir: Path, settings: Settings, naming, parser) -> list:
        """``[(row, seed), ...]`` to run next; [] when every row stopped."""
        sweep = read_sweep(sweep_dir)
        ok = {c.name for c in sweep.cells if is_ok(c.record)}
        limit = self.seed_limit
        for row in rows:  # (names every row's cells up to the limit, which the plans look up)
            row.ok_seeds = [s for s in range(1, limit + 1) if row.dirname(s, naming, parser) in ok]
        planned = self.plans(sweep, rows, settings)
        wanted = {id(row): set() for row in rows}
        for row in (r for r in rows if r.base is not None):
            paired = [s for s in row.ok_seeds if s in row.base.ok_seeds]
            row.planned, untestable = planned.get(id(row), (None, ""))
            if len(paired) >= self.rule.pilot_seeds and id(row) not in planned:
                row.stopped, row.why = UNTESTABLE, untestable or "no comparison with its baseline"
                continue
            step = self.rule.next(len(paired), *booked(row.planned))
            row.stopped, row.why = step.stopped, step.why
            if step.stopped:
                continue
            seeds = [s for s in range(1, limit + 1) if s in paired or s not in row.tried][:step.seeds]
            if len(seeds) < step.seeds:
                row.stopped, row.why = CELLS_FAILED, f"its cells failed: {len(paired)} paired seeds of {step.seeds}"
                continue
            wanted[id(row)].update(s for s in seeds if s not in row.ok_seeds)
            wanted[id(row.base)].update(s for s in seeds if s not in row.base.ok_seeds)
        for base in (r for r in rows if r.baseline):
            users = [r for r in rows if r.base is base]
            base.stopped = "" if any(not r.stopped for r in users) else "baseline"
            base.why = "runs the seeds of the rows compared with it"
        batch = []
        for row in rows:
            for seed in sorted(wanted[id(row)]):
                if seed not in row.tried:
                    batch.append((row, seed))
        return batch

    def plans(self, sweep, rows, settings) -> dict:
        """``{id(row): (seeds_needed, "")}`` from the report of the sweep as it stands, for rows
        whose comparison is testable; ``(None, why not)`` for the others that have cells."""
        if not sweep.cells:
            return {}
        (report,) = reports_of([sweep], replace(settings, sentence_test=False))  # the plan needs no sentence-only test
        by_dir = {name: row for row in rows for name in row.dirnames.values()}
        bases = baselines(report.rows, settings.baseline)
        out = {}
        for report_row in report.rows:
            mine = {id(by_dir[c.name]) for c in report_row.cells if c.name in by_dir}
            if len(mine) != 1 or bases[id(report_row)] in (None, report_row):
                continue
            test = report_row.tests.get(("bleu", "test"))
            if test is not None:
                out[mine.pop()] = (report_row.values.get("seeds_needed"), "")
            else:
                note = report_row.values.get("p_note") or str(report_row.values.get("verdict_bleu") or "")
                out[mine.pop()] = (None, note)
        return out

    def write_state(self, sweep_dir: Path, rows, naming, parser) -> None:
        """The plan as it stands: every cell a row has finished or this run launched, and each row's stop."""
        cells = [{"dirname": row.dirname(s, naming, parser), "overrides": row.overrides + [f"{SEED}={s}"]}
                 for row in rows for s in sorted(set(row.ok_seeds) | row.tried)]
        write_json_atomic(sweep_dir / STRATEGY_FILE, {
            "strategy": "seeds",
            "settings": self.state_settings(),
            "rows": [{"row": r.label, "overrides": r.overrides, "baseline": r.baseline, "seeds": r.ok_seeds,
                      "planned": r.planned, "stopped": r.stopped, "why": r.why} for r in rows],
            "cells": cells,
        })


def row_label(job, jobs) -> str:
    """A row's name: the values of the keys the grid's ``jobs`` vary, e.g. ``placement=none``."""
    swept = {k.lstrip("+~"): v for k, v in (line.split("=", 1) for line in job)
             if len({value_in(j, k) for j in jobs}) > 1}
    return ",".join(f"{k}={v}" for k, v in swept.items()) or "the one row"


def link_baselines(rows, base_key: str, grid=None) -> None:
    """Set each compared row's ``base``: the baseline row equal to it in every grid value but
    ``base_key``. ``grid(row)``: the overrides that make a row (default: all of its overrides)."""
    def rest(row):
        return [o for o in (grid(row) if grid else row.overrides) if o.split("=", 1)[0] != base_key]
    for row in rows:
        row.base = None if row.baseline else next((r for r in rows if r.baseline and rest(r) == rest(row)), None)


def booked(planned) -> tuple:
    """The rule's ``(planned, shown)`` for the report's seeds_needed: a number; beyond MAX_SEEDS
    (">1000": more seeds than any plan, so the row goes on to max_seeds); or None where no number
    of seeds reaches the power at this test size."""
    if isinstance(planned, int):
        return planned, ""
    if isinstance(planned, str) and planned.startswith(">"):
        return MAX_SEEDS + 1, f"more than {MAX_SEEDS}"
    return None, ""


def value_in(job, key):
    """The value a job's ``key=value`` lines give ``key`` (None without one)."""
    return next((line.split("=", 1)[1] for line in job if line.split("=", 1)[0] == key), None)


def strategy_settings(settings: dict) -> Settings:
    """The report's settings for a seeds strategy's settings (as its state keeps them): the table,
    its power section and every plan use the strategy's baseline, effect and test size."""
    return Settings(baseline=parse_baseline(settings["baseline"]), power=True, effect=float(settings["effect"]),
                    test_size=settings.get("test_size"))
