"""The statistics of the report's rows: across-seed arithmetic (mean, sample standard deviation
and the 95% t-interval of a mean), a row's scores over its seeds, its comparison with its baseline
row (Δ, sacreBLEU's sentence-only test, the verdict over seeds with Holm's adjustment) and its
power columns. The tests themselves live in ``posenc.stats`` (``verdict``, ``power``); this module
fills a table row's columns from them. It knows a row by its attributes (``posenc.report.rows``
builds the rows and imports this module, never the other way)."""

import math
import statistics
from dataclasses import dataclass, fields, replace

import numpy as np

from posenc.cells.record import field, inexact_resume, is_ok, status_of, time_capped
from posenc.metrics import bootstrap_ci, corpus_score
from posenc.report.scores import Interval, MeanSd, RowScores, SplitScores
from posenc.report.significance import paired_test
from posenc.stats import power as power_mod
from posenc.stats.verdict import ALPHA, holm, seed_test, verdict

BOOTSTRAP_CI_RESAMPLES = 1000

# The verdicts a table computes, each (metric, split), named as their columns' suffix: `verdict`
# answers one of them (the primary question, BLEU on the test split by default); the others are
# secondary, each Holm-adjusted in its own family (docs/statistics.md says why).
VERDICT_METRICS = ("bleu", "chrf")

# Two-sided 95% quantiles of Student's t, t(0.975, df), for df = 1..30 (tabulated to 4 decimals;
# the tests check them against scipy). Beyond 30 the Cornish-Fisher series below is within 1e-4.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """t(0.975, df): the multiplier of the standard error in a 95% interval of a mean."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def mean_sd(values):
    """``(mean, sample sd)`` of the values that are not None; ``(None, None)`` when there are none.
    One value has sd 0.0 (nothing to spread)."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def ci95(values):
    """The 95% confidence interval of the mean, ``(low, high)``: mean ± t(0.975, n-1) sd / sqrt(n).
    None below two values: one seed says nothing about the spread between seeds."""
    values = [float(v) for v in values if v is not None]
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    half = t975(len(values) - 1) * sd / math.sqrt(len(values))
    return mean - half, mean + half


def row_scores(row, has_long: bool) -> None:
    """A table row's scores over its seeds (``row.scores``): mean and sd of each metric, BLEU's 95%
    interval (over seeds, or a bootstrap over sentences for one seed), chrF++ per seed, and its
    seeds' counts."""
    splits = ("test", "test_long") if has_long else ("test",)
    chrf = {}
    for split in splits:
        # chrF++ of each seed: from its output (records older than chrF++ get it here), else as recorded.
        by_seed = {seed: value for seed, value in row.seed_values(field("chrf", split)).items()}
        by_seed.update({seed: corpus_score(o.chrf_array.sum(0), o.chrf_options, "chrf")
                        for seed, o in row.outputs.get(split, {}).items()})
        chrf[split] = MeanSd(*mean_sd(by_seed.values()))
        row.chrf_by_seed[split] = by_seed
    def over_seeds(name):
        return MeanSd(*mean_sd(row.seed_values(name).values()))
    row.scores = RowScores(
        splits={split: SplitScores(over_seeds(field("bleu", split)), over_seeds(field("tok_bleu", split)), chrf[split])
                for split in splits},
        valid_ppl=over_seeds("valid_ppl"), bleu_ci=bleu_interval(row),
        seeds=[c.record.seed for c in row.ok_cells()],
        not_ok=[f"seed {c.record.seed} {status_of(c.record)}" for c in row.cells if not is_ok(c.record)],
        # Finished, but training stopped at budget.max_time_min before its planned epochs: its score
        # says how far this machine got in that time, not what the configuration reaches.
        time_capped=[c.record.seed for c in row.ok_cells() if time_capped(c.record)],
        # Resumed from a checkpoint without its random states (before issue 48): close to an
        # uninterrupted run, not equal; redo=inexact retrains them.
        resumed_inexactly=[c.record.seed for c in row.ok_cells() if inexact_resume(c.record)])


def bleu_interval(row) -> Interval:
    """BLEU's 95% interval on test: over seeds from two, else a bootstrap over one seed's sentences."""
    bleus = list(row.seed_values("bleu").values())
    if len(bleus) >= 2:
        return Interval(*ci95(bleus), "seeds")
    if len(bleus) == 1 and row.outputs["test"]:
        output = next(iter(row.outputs["test"].values()))
        return Interval(*bootstrap_ci(output.stats, output.options, BOOTSTRAP_CI_RESAMPLES), "bootstrap")
    return Interval()


@dataclass
class Comparison:
    """A table row against its baseline row on one split, as sacreBLEU's ``Score`` is a score:
    typed fields, formatted apart (``columns``: the table's names, ``_<split>`` but on test)."""
    delta_bleu: float = None          # mean over seeds of BLEU(row) - BLEU(baseline)
    p_value: float = None             # sacreBLEU's sentence-only paired test
    delta_bleu_tested: float = None   # what that test is about: BLEU of the concatenated outputs
    delta_chrf: float = None
    paired_seeds: int = 0             # seeds in the sentence-only test
    p_note: str = ""                  # why the row is not tested ("baseline", ...), or ""
    delta_seeds: list = None          # the seeds Δ is over; None: no comparison (a baseline, no baseline row)
    delta_seeds_left_out: list = None
    delta_seeds_why: str = None

    def columns(self, split: str) -> dict:
        """The table's columns, in their order; a row with no comparison has no ``delta_seeds*``."""
        names = [f.name for f in fields(self)]
        if self.delta_seeds is None:
            names = [name for name in names if not name.startswith("delta_seeds")]
        return {field(name, split): getattr(self, name) for name in names}


@dataclass
class Verdict:
    """A table row's verdict over seeds against its baseline row on one metric and split
    (``posenc.stats.verdict``), typed as ``Comparison`` is: the seed test's p, Holm's p over the rows
    sharing the baseline, the CI of Δ and its level (95%; a sequential design's row: the repeated CI
    at its row's level), and better/worse/no evidence or why there is none."""
    p_seeds: float = None
    p_seeds_holm: float = None
    delta_ci_low: float = None
    delta_ci_high: float = None
    verdict: str = None
    delta_ci_level: float = None   # the interval's coverage: 1 - ALPHA, or 1 - the row's α (sequential)

    def columns(self, metric: str, split: str) -> dict:
        """The table's columns, in their order (BLEU's bare, chrF++'s with ``_chrf``; ``_<split>`` but on test)."""
        return {verdict_column(f.name, metric, split): getattr(self, f.name) for f in fields(self)}


def significance(rows, split, bases, settings):
    """Δ, sacreBLEU's sentence-only p and the verdict over seeds of every row against its baseline
    (``bases``: ``{id(row): its baseline row}``, the report's ``baselines``) on one split, for BLEU and
    chrF++, into each row's ``comparisons[split]`` and ``verdicts[(metric, split)]``; returns the sentence-only test's
    signature."""
    base_key, base_value = settings.baseline
    batches = {}
    for row in rows:
        cmp = row.comparisons[split] = Comparison()
        base = bases[id(row)]
        if base is row:
            cmp.p_note = "baseline"
            continue
        if base is None:
            cmp.p_note = f"no baseline row ({base_key}={base_value})"
            continue
        mine, theirs = row.seed_values(field("bleu", split)), base.seed_values(field("bleu", split))
        common = [s for s in mine if s in theirs]
        cmp.p_note = untestable(row, base, split, common)
        paired = tuple(s for s in common if s in row.outputs[split] and s in base.outputs[split])
        # Δ, its CI and the verdict over the same seeds: those with outputs on both sides where the
        # row is tested, else (no verdict) those both finished.
        used = paired if not cmp.p_note else tuple(common)
        cmp.delta_seeds = list(used)
        cmp.delta_seeds_left_out = [s for s in common if s not in used]
        cmp.delta_seeds_why = row.problems[split] or (base.problems[split] and f"baseline: {base.problems[split]}")
        if used:
            cmp.delta_bleu = float(np.mean([mine[s] - theirs[s] for s in used]))
        chrf_mine, chrf_theirs = row.chrf_by_seed.get(split, {}), base.chrf_by_seed.get(split, {})
        chrf_used = [s for s in used if s in chrf_mine and s in chrf_theirs]
        if chrf_used:
            cmp.delta_chrf = float(np.mean([chrf_mine[s] - chrf_theirs[s] for s in chrf_used]))
        if cmp.p_note:
            continue
        batches.setdefault((id(base), paired), (base, paired, []))[2].append(row)
    signature = ""
    def joined(row, paired):
        outs = [row.outputs[split][s] for s in paired]
        return [h for o in outs for h in o.hypotheses], [st for o in outs for st in o.stats]
    for base, paired, members in batches.values() if settings.sentence_test else ():
        systems = {str(i): joined(row, paired) for i, row in enumerate(members)}
        options = base.outputs[split][paired[0]].options
        base_bleu, results, signature = paired_test(joined(base, paired), systems, options, settings.test,
                                                    settings.samples)
        for i, row in enumerate(members):
            cmp = row.comparisons[split]
            cmp.p_value = results[str(i)].p_value
            # What the test is about: BLEU of the concatenated outputs, not the mean over seeds (Δ).
            cmp.delta_bleu_tested = results[str(i)].score - base_bleu
            cmp.paired_seeds = len(paired)
    verdicts(rows, split, batches)
    return signature


def verdict_column(name: str, metric: str = "bleu", split: str = "test") -> str:
    """A verdict's column: BLEU keeps the contract's bare names, chrF++ gets "_chrf"; ``_<split>`` but on test."""
    return field(name + ("" if metric == "bleu" else f"_{metric}"), split)


def verdicts(rows, split, batches):
    """The seed test of every testable row, Holm over the rows sharing a baseline, the verdict."""
    tested = {id(row): (base, paired) for base, paired, members in batches.values() for row in members}
    for metric in VERDICT_METRICS:
        families = {}
        for row in rows:
            out = row.verdicts[(metric, split)] = Verdict()
            note = row.comparisons[split].p_note
            if id(row) not in tested:
                out.verdict = "n/a: baseline" if note == "baseline" else f"n/a: {note}"
                continue
            base, paired = tested[id(row)]
            if len(paired) < 2:
                out.verdict = "n/a: one paired seed (no spread over seeds to test against)"
                continue
            mine = [row.outputs[split][s].arrays(metric) for s in paired]
            theirs = [base.outputs[split][s].arrays(metric) for s in paired]
            test = seed_test([m[0] for m in mine], [t[0] for t in theirs], mine[0][1], metric)
            row.tests[(metric, split)] = test
            setattr(row.comparisons[split], f"delta_{metric}", test.delta)   # the CI's own centre, same seeds
            out.p_seeds = test.p
            out.delta_ci_low, out.delta_ci_high, out.delta_ci_level = test.ci_low, test.ci_high, 1 - ALPHA
            families.setdefault(id(base), []).append(row)
        for members in families.values():
            adjusted = holm({id(r): r.tests[(metric, split)].p for r in members})
            for r in members:
                r.verdicts[(metric, split)].p_seeds_holm = adjusted[id(r)]
                r.verdicts[(metric, split)].verdict = verdict(r.tests[(metric, split)].delta, adjusted[id(r)])


@dataclass
class Power:
    """A row's power planning for BLEU's verdict on test, typed as ``Comparison`` is: all None for a
    row with no seed test (no pilot); ``advice`` None for a row that books nothing (a sequential
    design stopped it), "" where the plan needs none."""
    mde_bleu: float = None
    seeds_needed: power_mod.SeedsPlan = None       # the seeds to book (at the spread's upper limit)
    seeds_needed_low: power_mod.SeedsPlan = None   # the plug-in plan
    pilot_seeds: int = None
    advice: str = None
    seed_sd: float = None
    sentence_sd: float = None
    shared_sd: float = None

    def columns(self) -> dict:
        """The table's columns, in their order: a row with no pilot has no sd's, a stopped row no advice."""
        out = {"mde_bleu": self.mde_bleu, "seeds_needed": self.seeds_needed, "seeds_needed_low": self.seeds_needed_low,
               "pilot_seeds": self.pilot_seeds}
        if self.advice is not None:
            out["power_advice"] = self.advice
        if self.pilot_seeds is not None:
            out.update(power_seed_sd=self.seed_sd, power_sentence_sd=self.sentence_sd, power_shared_sd=self.shared_sd)
        return out


def power_columns(rows, settings, stopped):
    """mde_bleu (at the row's seeds and test set), and for settings.effect at settings.test_size the
    seeds to book (seeds_needed), the plug-in plan (seeds_needed_low) and the pilot they rest on. A
    row a sequential design has stopped (``stopped``: their ids) books nothing: its verdict is
    frozen at that stop."""
    for row in rows:
        test = row.tests.get(("bleu", "test"))
        v = row.power = Power()
        if test is None:
            continue
        components = power_mod.Components.of(test)
        v.mde_bleu = power_mod.mde(test.n, components)
        v.pilot_seeds = test.n
        if id(row) not in stopped:
            v.seeds_needed = power_mod.seeds_plan(settings.effect, components, settings.test_size)
            v.seeds_needed_low = power_mod.seeds_plan(settings.effect, components, settings.test_size, book=False)
            v.advice = advice(settings, components, v.seeds_needed, v.seeds_needed_low)
        v.seed_sd = math.sqrt(components.seed_var)
        v.sentence_sd = math.sqrt(components.sentence_var)
        v.shared_sd = math.sqrt(components.shared_var)


UNREACHABLE = "n/a: not with this many test sentences, whatever the seeds"


def plan_value(plan):
    """A ``power.SeedsPlan`` as the table's column holds it: the seeds, ">1000" beyond
    MAX_SEEDS, or UNREACHABLE; None without a plan."""
    if plan is None:
        return None
    if plan.seeds is not None:
        return plan.seeds
    return f">{power_mod.MAX_SEEDS}" if plan.reachable else UNREACHABLE


def advice(settings, components, book, low) -> str:
    """What a user does when the pilot is too small to vouch for its plan (``book`` and ``low``:
    ``power.SeedsPlan``), or ""."""
    n, beyond = components.pilot_seeds, f"more than {power_mod.MAX_SEEDS}"
    if low.seeds is None or not book.reachable or (book.seeds is not None and book.seeds <= power_mod.WIDE * low.seeds):
        return ""
    low = low.seeds
    book = beyond if book.seeds is None else book.seeds   # the booking is past MAX_SEEDS
    again = power_mod.booking(settings.effect, replace(components, pilot_seeds=2 * n), settings.test_size)
    return (f"{n} seeds cannot pin this down (the plan ranges from {low} to {book}): book {book}, or run {n} more "
            f"and plan again; with {2 * n} seeds that spread as these do, the booking would be "
            f"{beyond if again is None else f'about {again}'}")


def untestable(row, base, split, common) -> str:
    """Why the row cannot be tested against its baseline on this split, or ""."""
    if not row.seed_values(field("bleu", split)):
        return "no finished seed" if split == "test" else f"no {split} score"
    if not base.seed_values(field("bleu", split)):
        return "baseline has no finished seed"
    if not common:
        return "no seed in common with the baseline"
    if not row.outputs[split]:
        return row.problems[split] or "no output"
    if not base.outputs[split]:
        return f"baseline: {base.problems[split] or 'no output'}"
    paired = [s for s in common if s in row.outputs[split] and s in base.outputs[split]]
    if not paired:
        return "no seed with outputs on both sides"
    if any(row.outputs[split][s].testset_key != base.outputs[split][s].testset_key for s in paired):
        return "other test set than the baseline"
    if any(row.outputs[split][s].options != base.outputs[split][s].options for s in paired):
        return "scored with another BLEU signature than the baseline"
    return ""
