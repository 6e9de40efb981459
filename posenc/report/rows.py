"""A sweep's cells as table rows: one row per configuration (every key but the seed), its scores
over seeds, and its difference from a baseline row with a paired test on the system outputs."""

import math
from dataclasses import dataclass, replace
from dataclasses import field as dc_field

import numpy as np

from posenc.cells.record import SPLITS, family, field, is_ok, status_of, time_capped
from posenc.cells.rows import DEFAULT_BASELINE, baseline_of, row_name
from posenc.cells.sweep import RECORD_KEYS
from posenc.kinds import PLACEMENTS, kind_names
from posenc.metrics import Scorer, bootstrap_ci, corpus_bleu, corpus_score
from posenc.report import buckets as bucket_mod
from posenc.report.outputs import cell_output
from posenc.report.references import paper_numbers
from posenc.report.sequential import apply_decisions, stopped_rows
from posenc.report.significance import DEFAULT_RESAMPLES, TESTS, paired_test
from posenc.report.stats import ci95, mean_sd
from posenc.report.testsets import TestSets
from posenc.report.tuning import is_tuned, tuned_values
from posenc.stats import power as power_mod
from posenc.stats.verdict import holm, seed_test, verdict

BOOTSTRAP_CI_RESAMPLES = 1000


class ReportError(ValueError):
    """A report option that cannot be honoured; the message is one line."""


# The verdicts a table computes, each (metric, split), named as their columns' suffix: `verdict`
# answers one of them (the primary question, BLEU on the test split by default); the others are
# secondary, each Holm-adjusted in its own family (docs/statistics.md says why).
VERDICT_METRICS = ("bleu", "chrf")
PRIMARIES = {field(metric, split): (metric, split) for split in SPLITS for metric in VERDICT_METRICS}


@dataclass(frozen=True)
class Settings:
    baseline: tuple = DEFAULT_BASELINE   # (key, value) of the row every other row is tested against
    edges: tuple = None                       # source-length bucket edges; None: by corpus
    test: str = "bs"                          # "bs" (paired bootstrap) or "ar" (approximate randomization)
    resamples: int = 0                        # 0: sacreBLEU's default for the test
    power: bool = False                       # mde_bleu and seeds_needed, and the power section
    effect: float = power_mod.DEFAULT_EFFECT  # the |Δ| seeds_needed is for (BLEU)
    test_size: int = None                     # sentences seeds_needed plans for; None: this test set
    primary: str = "bleu"                     # the question `verdict` answers: one of PRIMARIES
    sentence_test: bool = True                # False: no sacreBLEU sentence-only test (p_value); a plan needs none

    @property
    def samples(self) -> int:
        return self.resamples or DEFAULT_RESAMPLES[self.test]


def parse_baseline(text: str) -> tuple:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise ReportError(f"--baseline {text!r}: expected KEY=VALUE, e.g. placement=both or pe=learned")
    return key.lstrip("+"), value


@dataclass
class Row:
    sweep: str
    identity: dict                 # model, pe, data, extra swept keys, placement -> value
    cells: list = dc_field(default_factory=list)
    outputs: dict = dc_field(default_factory=dict)    # split -> {seed: Output}
    problems: dict = dc_field(default_factory=dict)   # split -> why an ok cell has no usable output
    values: dict = dc_field(default_factory=dict)     # the computed columns (see as_dict)
    tests: dict = dc_field(default_factory=dict)      # (metric, split) -> verdict.SeedTest against the baseline
    chrf_by_seed: dict = dc_field(default_factory=dict)   # split -> {seed: chrF++}

    def ok_cells(self):
        return [c for c in self.cells if is_ok(c.record)]

    def seed_values(self, name: str) -> dict:
        return {c.record.seed: getattr(c.record, name) for c in self.ok_cells() if getattr(c.record, name) is not None}


@dataclass
class Report:
    """The rows of one sweep and what its footnotes need."""
    sweep: object
    rows: list
    settings: Settings
    bucket_edges: tuple
    bucket_labels: list
    bucket_sizes: dict      # corpus label -> sentences per bucket
    has_long: bool
    test_signature: str     # sacreBLEU's signature of the paired test ("" when none ran)
    warnings: list


def order_key(key: str, value):
    order = {"placement": PLACEMENTS, "pe": kind_names()}.get(key)
    text = str(value)
    if order and text in order:
        return (0, order.index(text), "")
    try:
        return (1, float(text), "")
    except ValueError:
        return (2, 0, text)


def build_report(sweep, settings: Settings = Settings(), testsets: TestSets = None) -> Report:
    testsets = testsets or TestSets()
    if settings.test not in TESTS:
        raise ReportError(f"test {settings.test!r} is not allowed; allowed: {', '.join(TESTS)}")
    base_key, base_value = settings.baseline
    rows, warnings = _group(sweep, row_keys(sweep)), []
    for row in rows:
        seeds = [c.record.seed for c in row.cells]
        if len(seeds) != len(set(map(str, seeds))):
            warnings.append(f"row {row_name(row.identity)} has cells with the same seed; "
                            "pairing by seed takes the first")
    has_long = any(c.record.test_long.bleu is not None for r in rows for c in r.cells)
    splits = [s for s in SPLITS if s == "test" or has_long]
    scorer = Scorer()
    for row in rows:
        for split in splits:
            row.outputs[split], row.problems[split] = {}, ""
            for cell in row.ok_cells():
                output, why = cell_output(cell, split, testsets, scorer)
                if output is not None:
                    row.outputs[split].setdefault(output.seed, output)
                elif not row.problems[split]:
                    row.problems[split] = why
        _scores(row, has_long)
    check_primary(settings.primary)
    if PRIMARIES[settings.primary][1] not in splits:
        allowed = ", ".join(name for name, (_, split) in PRIMARIES.items() if split in splits)
        raise ReportError(f"--primary {settings.primary}: no cell of this sweep scored the "
                          f"{PRIMARIES[settings.primary][1]} split; allowed here: {allowed}")
    signature = ""
    for split in splits:
        signature = _significance(rows, split, base_key, base_value, settings) or signature
    _primary(rows, settings.primary)
    apply_decisions(rows, sweep, settings.primary)  # a seeds strategy's rows: their sequential verdicts
    edges, labels, sizes = _buckets(rows, settings)
    families = [family(r.cells[0].record) for r in rows]  # as the cells recorded it
    for row, (source, ppl, bleu) in zip(rows, paper_numbers([r.identity for r in rows], families)):
        row.values.update(paper_source=source, paper_ppl=ppl, paper_bleu=bleu)
    _paper_deltas(rows, base_key, base_value)
    if settings.power:
        _power(rows, settings, sweep)
    return Report(sweep, rows, settings, edges, labels, sizes, has_long, signature, warnings)


def check_primary(primary: str) -> None:
    if primary not in PRIMARIES:
        raise ReportError(f"--primary {primary}: names no metric of the table; allowed: {', '.join(PRIMARIES)}")


def row_keys(sweep) -> list:
    """What tells one row from another: the record's model, pe, data, any other key the sweep
    varies (in name order), and the placement."""
    return ["model", "pe", "data", *sweep.extra_keys, "placement"]


def check_baseline(sweeps, baseline) -> None:
    """Refuse a ``--baseline`` that names a key no sweep has, or a value no row has."""
    key, value = baseline
    keys = list(dict.fromkeys(k for s in sweeps for k in row_keys(s)))
    if key not in keys:
        raise ReportError(f"--baseline {key}={value}: {key} is not a key of any row; keys: {', '.join(keys)}")
    seen = {str(_cell_value(c, key)) for s in sweeps for c in s.cells}
    if value not in seen:
        raise ReportError(f"--baseline {key}={value}: no cell has {key}={value}; "
                          f"values: {', '.join(sorted(seen, key=lambda x: order_key(key, x)))}")


def _cell_value(cell, key):
    """The cell's value of a row key: as its record has it (RECORD_KEYS), else its override's."""
    return getattr(cell.record, key) if key in RECORD_KEYS else cell.overrides.get(key, "")


def _group(sweep, keys):
    rows = {}
    for cell in sweep.cells:
        ident = {k: _cell_value(cell, k) for k in keys}
        ident = {k: ("" if v is None else str(v)) for k, v in ident.items()}
        rows.setdefault(tuple(ident.values()), Row(sweep.label, ident)).cells.append(cell)
    ordered = sorted(rows.values(), key=lambda r: [order_key(k, v) for k, v in r.identity.items()])
    for row in ordered:
        row.cells.sort(key=lambda c: order_key("seed", c.record.seed))
    return ordered


def _scores(row: Row, has_long: bool) -> None:
    v = row.values
    names = ["bleu", "tok_bleu", "valid_ppl"] + (["bleu_test_long", "tok_bleu_test_long"] if has_long else [])
    for name in names:
        v[name], v[f"{name}_sd"] = mean_sd(row.seed_values(name).values())
    bleus = list(row.seed_values("bleu").values())
    v["bleu_ci_low"] = v["bleu_ci_high"] = None
    v["bleu_ci_kind"] = ""
    if len(bleus) >= 2:
        v["bleu_ci_low"], v["bleu_ci_high"] = ci95(bleus)
        v["bleu_ci_kind"] = "seeds"
    elif len(bleus) == 1 and row.outputs["test"]:
        output = next(iter(row.outputs["test"].values()))
        v["bleu_ci_low"], v["bleu_ci_high"] = bootstrap_ci(output.stats, output.options, BOOTSTRAP_CI_RESAMPLES)
        v["bleu_ci_kind"] = "bootstrap"
    for split in ("test", "test_long") if has_long else ("test",):
        # chrF++ of each seed: from its output (records older than chrF++ get it here), else as recorded.
        by_seed = {seed: value for seed, value in row.seed_values(field("chrf", split)).items()}
        by_seed.update({seed: corpus_score(o.chrf_array.sum(0), o.chrf_options, "chrf")
                        for seed, o in row.outputs.get(split, {}).items()})
        v[field("chrf", split)], v[field("chrf", split) + "_sd"] = mean_sd(by_seed.values())
        row.chrf_by_seed[split] = by_seed
    v["seeds"] = [c.record.seed for c in row.ok_cells()]
    v["seeds_ok"] = len(v["seeds"])
    v["not_ok"] = [f"seed {c.record.seed} {status_of(c.record)}" for c in row.cells
                   if not is_ok(c.record)]
    # Finished, but training stopped at budget.max_time_min before its planned epochs: its score
    # says how far this machine got in that time, not what the configuration reaches.
    v["time_capped"] = [c.record.seed for c in row.ok_cells() if time_capped(c.record)]


def baselines(rows, baseline) -> dict:
    """``{id(row): its baseline row}`` (the row itself for a baseline, None where its group has
    none): the row with the same identity but ``baseline``'s key at ``baseline``'s value."""
    index = baseline_of([row.identity for row in rows], *baseline)
    return {id(row): None if i is None else rows[i] for row, i in zip(rows, index)}


def _significance(rows, split, base_key, base_value, settings):
    """Δ, sacreBLEU's sentence-only p and the verdict over seeds of every row against its baseline
    on one split, for BLEU and chrF++; returns the sentence-only test's signature."""
    suffix = field("", split)
    bases = baselines(rows, (base_key, base_value))
    batches = {}
    for row in rows:
        v = row.values
        v[f"delta_bleu{suffix}"] = v[f"p_value{suffix}"] = v[f"delta_bleu_tested{suffix}"] = None
        v[f"delta_chrf{suffix}"] = None
        v[f"paired_seeds{suffix}"] = 0
        base = bases[id(row)]
        if base is row:
            v[f"p_note{suffix}"] = "baseline"
            continue
        if base is None:
            v[f"p_note{suffix}"] = f"no baseline row ({base_key}={base_value})"
            continue
        mine, theirs = row.seed_values(field("bleu", split)), base.seed_values(field("bleu", split))
        common = [s for s in mine if s in theirs]
        v[f"p_note{suffix}"] = _untestable(row, base, split, common)
        paired = tuple(s for s in common if s in row.outputs[split] and s in base.outputs[split])
        # Δ, its CI and the verdict over the same seeds: those with outputs on both sides where the
        # row is tested, else (no verdict) those both finished.
        used = paired if not v[f"p_note{suffix}"] else tuple(common)
        v[f"delta_seeds{suffix}"] = list(used)
        v[f"delta_seeds_left_out{suffix}"] = [s for s in common if s not in used]
        v[f"delta_seeds_why{suffix}"] = row.problems[split] or (base.problems[split] and
                                                                 f"baseline: {base.problems[split]}")
        if used:
            v[f"delta_bleu{suffix}"] = float(np.mean([mine[s] - theirs[s] for s in used]))
        chrf_mine, chrf_theirs = row.chrf_by_seed.get(split, {}), base.chrf_by_seed.get(split, {})
        chrf_used = [s for s in used if s in chrf_mine and s in chrf_theirs]
        if chrf_used:
            v[f"delta_chrf{suffix}"] = float(np.mean([chrf_mine[s] - chrf_theirs[s] for s in chrf_used]))
        if v[f"p_note{suffix}"]:
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
            row.values[f"p_value{suffix}"] = results[str(i)].p_value
            # What the test is about: BLEU of the concatenated outputs, not the mean over seeds (Δ).
            row.values[f"delta_bleu_tested{suffix}"] = results[str(i)].score - base_bleu
            row.values[f"paired_seeds{suffix}"] = len(paired)
    _verdicts(rows, split, batches)
    return signature


# The verdict's columns per metric: BLEU keeps the contract's bare names, chrF++ gets "_chrf".
VERDICT_COLUMNS = ("p_seeds", "p_seeds_holm", "delta_ci_low", "delta_ci_high", "verdict")


def verdict_column(name: str, metric: str = "bleu", split: str = "test") -> str:
    return field(name + ("" if metric == "bleu" else f"_{metric}"), split)


def own_verdict_column(metric: str = "bleu", split: str = "test") -> str:
    """The column of the metric's own verdict on the split (`verdict` itself is the primary's)."""
    return "verdict_bleu" if (metric, split) == ("bleu", "test") else verdict_column("verdict", metric, split)


def _verdicts(rows, split, batches):
    """The seed test of every testable row, Holm over the rows sharing a baseline, the verdict."""
    tested = {id(row): (base, paired) for base, paired, members in batches.values() for row in members}
    for metric in VERDICT_METRICS:
        families = {}
        for row in rows:
            cols = {name: verdict_column(name, metric, split) for name in VERDICT_COLUMNS}
            for col in cols.values():
                row.values[col] = None
            note = row.values[f"p_note{'' if split == 'test' else '_' + split}"]
            if id(row) not in tested:
                row.values[cols["verdict"]] = "n/a: baseline" if note == "baseline" else f"n/a: {note}"
                continue
            base, paired = tested[id(row)]
            if len(paired) < 2:
                row.values[cols["verdict"]] = "n/a: one paired seed (no spread over seeds to test against)"
                continue
            mine = [row.outputs[split][s].arrays(metric) for s in paired]
            theirs = [base.outputs[split][s].arrays(metric) for s in paired]
            test = seed_test([m[0] for m in mine], [t[0] for t in theirs], mine[0][1], metric)
            row.tests[(metric, split)] = test
            row.values[field(f"delta_{metric}", split)] = test.delta   # the CI's own centre, from the same seeds
            row.values[cols["p_seeds"]] = test.p
            row.values[cols["delta_ci_low"]], row.values[cols["delta_ci_high"]] = test.ci_low, test.ci_high
            families.setdefault(id(base), []).append(row)
        for members in families.values():
            adjusted = holm({id(r): r.tests[(metric, split)].p for r in members})
            for r in members:
                cols = {name: verdict_column(name, metric, split) for name in VERDICT_COLUMNS}
                r.values[cols["p_seeds_holm"]] = adjusted[id(r)]
                r.values[cols["verdict"]] = verdict(r.tests[(metric, split)].delta, adjusted[id(r)])


def _primary(rows, primary: str) -> None:
    """`verdict` answers the primary question; BLEU's own test-split verdict stays in `verdict_bleu`."""
    metric, split = PRIMARIES[primary]
    for row in rows:
        v = row.values
        v["verdict_bleu"] = v["verdict"]
        v["verdict"] = v[verdict_column("verdict", metric, split)]
        v["primary"] = primary


def _paper_deltas(rows, base_key, base_value):
    """The paper's own Δ beside a row whose paper measured the same comparison as its baseline."""
    bases = baselines(rows, (base_key, base_value))
    for row in rows:
        base = bases[id(row)]
        v = row.values
        v["paper_delta"] = None
        if base is not None and base is not row and v.get("paper_bleu") and base.values.get("paper_bleu") \
                and v.get("paper_source") == base.values.get("paper_source"):
            v["paper_delta"] = round(float(v["paper_bleu"]) - float(base.values["paper_bleu"]), 2)


def _power(rows, settings, sweep):
    """mde_bleu (at the row's seeds and test set), and for settings.effect at settings.test_size the
    seeds to book (seeds_needed), the plug-in plan (seeds_needed_low) and the pilot they rest on. A
    row a sequential design has stopped books nothing: its verdict is frozen at that stop."""
    stopped = stopped_rows(rows, sweep)
    for row in rows:
        test = row.tests.get(("bleu", "test"))
        v = row.values
        v["mde_bleu"] = v["seeds_needed"] = v["seeds_needed_low"] = v["pilot_seeds"] = None
        if test is None:
            continue
        components = power_mod.Components.of(test)
        v["mde_bleu"] = power_mod.mde(test.n, components)
        v["pilot_seeds"] = test.n
        if id(row) not in stopped:
            v["seeds_needed"] = power_mod.seeds_plan(settings.effect, components, settings.test_size)
            v["seeds_needed_low"] = power_mod.seeds_plan(settings.effect, components, settings.test_size, book=False)
            v["power_advice"] = _advice(settings, components, v["seeds_needed"], v["seeds_needed_low"])
        v["power_seed_sd"] = math.sqrt(components.seed_var)
        v["power_sentence_sd"] = math.sqrt(components.sentence_var)
        v["power_shared_sd"] = math.sqrt(components.shared_var)


UNREACHABLE = "n/a: not with this many test sentences, whatever the seeds"


def plan_value(plan):
    """A ``power.SeedsPlan`` as the table's column holds it: the seeds, ">1000" beyond
    MAX_SEEDS, or UNREACHABLE; None without a plan."""
    if plan is None:
        return None
    if plan.seeds is not None:
        return plan.seeds
    return f">{power_mod.MAX_SEEDS}" if plan.reachable else UNREACHABLE


def _advice(settings, components, book, low) -> str:
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


def _untestable(row, base, split, common) -> str:
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


def _buckets(rows, settings):
    """BLEU by source-length bucket on the test split: per seed from the summed sufficient
    statistics of its sentences in each bucket, then averaged over seeds."""
    outputs = [o for r in rows for o in r.outputs.get("test", {}).values()]
    corpora = {str((c.record.corpus or {}).get("name") or c.record.data) for r in rows for c in r.cells}
    edges = settings.edges or bucket_mod.default_edges(corpora)
    labels = bucket_mod.labels(edges)
    per_testset, sizes = {}, {}
    for o in outputs:
        if o.testset_key not in per_testset:
            per_testset[o.testset_key] = bucket_mod.buckets_for(o.sources, edges)
            sizes[f"{o.corpus} ({o.testset_key[:8]})"] = per_testset[o.testset_key].sizes
    for row in rows:
        scores = []
        for o in row.outputs.get("test", {}).values():
            b = per_testset[o.testset_key]
            summed = b.summed(o.array)
            scores.append([corpus_bleu(s, o.options) if n else None for s, n in zip(summed, b.sizes)])
        for i, label in enumerate(labels):
            values = [s[i] for s in scores if s[i] is not None]
            row.values[f"bleu_len_{label}"] = float(np.mean(values)) if values else None
        row.values["bucket_seeds"] = len(scores)
    return edges, labels, sizes


def as_dicts(report: Report) -> list:
    """The rows as plain dicts (JSON-able): one per row, every column, for CSV and W&B tables."""
    out = []
    for row in report.rows:
        d = {"sweep": row.sweep, **row.identity, "baseline": "=".join(report.settings.baseline)}
        if is_tuned(report.sweep):  # a tune strategy's row: the values its study chose
            d["tuned"] = tuned_values(report.sweep, row.cells)
        for k, val in row.values.items():
            if isinstance(val, power_mod.SeedsPlan):
                val = plan_value(val)
            d[k] = "; ".join(map(str, val)) if isinstance(val, list) else val
        out.append(d)
    return out
