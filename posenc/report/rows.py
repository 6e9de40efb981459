"""A sweep's cells as table rows (``TableRow``): one row per configuration (every key but the seed),
its scores over seeds, and its difference from a baseline row with a paired test on the system
outputs. The statistics that fill a row's columns live in ``posenc.report.stats``; this module
groups the cells, reads their outputs and assembles the ``Report``."""

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from types import MappingProxyType

import numpy as np

from posenc.cells.record import SPLITS, family, field, is_ok
from posenc.cells.rows import DEFAULT_BASELINE, baseline_of, row_name
from posenc.cells.sweep import RECORD_KEYS
from posenc.kinds import PLACEMENTS, kind_names
from posenc.metrics import Scorer, corpus_bleu
from posenc.report import buckets as bucket_mod
from posenc.report.outputs import cell_output
from posenc.report.references import PaperNumbers, paper_numbers
from posenc.report.scores import LengthScores, RowScores
from posenc.report.sequential import apply_decisions, design_question_problem, keep_stop_seeds, stopped_rows
from posenc.report.significance import DEFAULT_RESAMPLES, TESTS
from posenc.report.stats import VERDICT_METRICS, Power, plan_value, power_columns, row_scores, significance
from posenc.report.testsets import TestSets
from posenc.report.tuning import is_tuned, tuned_values
from posenc.stats import power as power_mod


class ReportError(ValueError):
    """A report option that cannot be honoured; the message is one line."""


# The verdicts a table computes (report.stats.VERDICT_METRICS), each (metric, split), named as their
# columns' suffix: `verdict` answers one of them, the primary question.
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
class SequentialStop:
    """A row a sequential design decides (``sequential.apply_decisions``): its median-unbiased Δ and
    its stop in words; ``stop`` None for a row no design decides (it has neither column). A stopped
    row's columns are over its stopping look's ``seeds``; ``left_out``: the seeds it ran beyond them
    (overrun; ``sequential.keep_stop_seeds``), and Δ over every seed it ran."""
    delta_median_unbiased: float = None
    stop: str = None
    seeds: list = None
    left_out: list = None           # overrun: seeds it ran after its stopping look
    delta_with_overrun: float = None  # Δ over every seed it ran, overrun included (an estimate outside the design)


@dataclass
class TableRow:
    """One row of the report's table: a configuration's cells over seeds, its outputs, and its columns,
    typed (``scores``, ``comparisons``, ``verdicts``, ...) as sacreBLEU's ``Score`` is; ``values`` names
    them as the CSV's columns."""
    sweep: str
    identity: dict                 # model, pe, data, extra swept keys, placement -> value
    cells: list = dc_field(default_factory=list)
    outputs: dict = dc_field(default_factory=dict)    # split -> {seed: Output}
    problems: dict = dc_field(default_factory=dict)   # split -> why an ok cell has no usable output
    scores: RowScores = dc_field(default_factory=RowScores)   # over its seeds (stats.row_scores)
    comparisons: dict = dc_field(default_factory=dict)   # split -> stats.Comparison with the baseline row
    verdicts: dict = dc_field(default_factory=dict)   # (metric, split) -> stats.Verdict against the baseline
    primary: str = None                               # the question `verdict` answers (Settings.primary)
    sequential: SequentialStop = dc_field(default_factory=SequentialStop)
    by_length: LengthScores = dc_field(default_factory=LengthScores)
    paper: PaperNumbers = dc_field(default_factory=PaperNumbers)
    power: Power = None                               # None: the report plans no power (Settings.power)
    tests: dict = dc_field(default_factory=dict)      # (metric, split) -> verdict.SeedTest against the baseline
    chrf_by_seed: dict = dc_field(default_factory=dict)   # split -> {seed: chrF++}

    def ok_cells(self):
        return [c for c in self.cells if is_ok(c.record)]

    @property
    def primary_verdict(self) -> str:
        """The verdict of the primary question (`verdict`), read from ``verdicts``; None before it is set."""
        return None if self.primary is None else self.verdicts[PRIMARIES[self.primary]].verdict

    @property
    def values(self) -> Mapping:
        """The row's computed columns as the CSV names them, in its order: the one place that
        flattens the typed fields into names (``as_dicts`` adds the identity and formats them).
        Read-only: a column is changed in its typed field, never here (a write would be lost)."""
        out = dict(self.scores.columns())
        for split, comparison in self.comparisons.items():
            out.update(comparison.columns(split))
            for metric in VERDICT_METRICS:
                out.update(self.verdicts[(metric, split)].columns(metric, split))
        if self.primary is not None:
            out.update(verdict=self.primary_verdict, verdict_bleu=self.verdicts[("bleu", "test")].verdict,
                       primary=self.primary)
        if self.sequential.stop is not None:
            out.update(delta_median_unbiased=self.sequential.delta_median_unbiased, sequential=self.sequential.stop,
                       sequential_seeds=self.sequential.seeds, sequential_seeds_left_out=self.sequential.left_out,
                       delta_bleu_with_overrun=self.sequential.delta_with_overrun)
        out.update({**self.by_length.columns(), **self.paper.columns()})
        return MappingProxyType({**out, **self.power.columns()} if self.power is not None else out)

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
    check_primary(settings.primary)
    problem = design_question_problem(sweep, settings.primary, settings.baseline)
    if problem:
        raise ReportError(problem)
    rows, warnings = _group(sweep, row_keys(sweep)), []
    keep_stop_seeds(rows, sweep, baselines(rows, settings.baseline))  # an adaptive row: its stopping look's seeds
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
        row_scores(row, has_long)
    if PRIMARIES[settings.primary][1] not in splits:
        allowed = ", ".join(name for name, (_, split) in PRIMARIES.items() if split in splits)
        raise ReportError(f"--primary {settings.primary}: no cell of this sweep scored the "
                          f"{PRIMARIES[settings.primary][1]} split; allowed here: {allowed}")
    signature, bases = "", baselines(rows, settings.baseline)
    for split in splits:
        signature = significance(rows, split, bases, settings) or signature
    _primary(rows, settings.primary)
    apply_decisions(rows, sweep)  # a seeds strategy's rows: their sequential verdicts
    edges, labels, sizes = _buckets(rows, settings)
    families = [family(r.cells[0].record) for r in rows]  # as the cells recorded it
    for row, (source, ppl, bleu) in zip(rows, paper_numbers([r.identity for r in rows], families)):
        row.paper = PaperNumbers(source, ppl, bleu)
    _paper_deltas(rows, base_key, base_value)
    if settings.power:
        power_columns(rows, settings, stopped_rows(rows, sweep))
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
        rows.setdefault(tuple(ident.values()), TableRow(sweep.label, ident)).cells.append(cell)
    ordered = sorted(rows.values(), key=lambda r: [order_key(k, v) for k, v in r.identity.items()])
    for row in ordered:
        row.cells.sort(key=lambda c: order_key("seed", c.record.seed))
    return ordered


def baselines(rows, baseline) -> dict:
    """``{id(row): its baseline row}`` (the row itself for a baseline, None where its group has
    none): the row with the same identity but ``baseline``'s key at ``baseline``'s value."""
    index = baseline_of([row.identity for row in rows], *baseline)
    return {id(row): None if i is None else rows[i] for row, i in zip(rows, index)}


def _primary(rows, primary: str) -> None:
    """`verdict` answers the primary question; BLEU's own test-split verdict stays in `verdict_bleu`."""
    for row in rows:
        row.primary = primary


def _paper_deltas(rows, base_key, base_value):
    """The paper's own Δ beside a row whose paper measured the same comparison as its baseline."""
    bases = baselines(rows, (base_key, base_value))
    for row in rows:
        base = bases[id(row)]
        mine = row.paper
        if base is not None and base is not row and mine.bleu and base.paper.bleu and mine.source == base.paper.source:
            mine.delta = round(float(mine.bleu) - float(base.paper.bleu), 2)


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
        means = {}
        for i, label in enumerate(labels):
            values = [s[i] for s in scores if s[i] is not None]
            means[label] = float(np.mean(values)) if values else None
        row.by_length = LengthScores(means, len(scores))
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
