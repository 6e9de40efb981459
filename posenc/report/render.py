"""Reports as Markdown, LaTeX (booktabs ``tabular``) or CSV: the scores table, the length table,
several sweeps side by side, and the footnotes that say what each number is."""

import csv
import io

from posenc.cells.layout import RESULT_FILE
from posenc.cells.plan import PLAN_FILE
from posenc.cells.record import error_of, inexact_resume, is_ok, status_of, time_capped
from posenc.metrics import on_tokenized_text
from posenc.report.references import SOURCES, WHERE
from posenc.report.rows import PRIMARIES, as_dicts, order_key
from posenc.report.sequential import short_stop, stopped_rows, strategy_notes, strategy_table
from posenc.report.significance import TESTS
from posenc.report.stats import plan_value
from posenc.report.tuning import is_tuned, trials_table, tune_notes, tune_table
from posenc.stats.power import PLAN_LEVEL, POWER
from posenc.stats.verdict import ALPHA, BETTER, DF_GUARD, WORSE

FORMATS = ("md", "csv", "latex")
PLACEMENT_LABEL = {"both": "both (encoder and decoder)", "source": "source (encoder) only",
                   "target": "target (decoder) only", "none": "neither"}


# -- cell formatting ------------------------------------------------------------------------
def mean_sd_text(mean, sd, digits=2) -> str:
    if mean is None:
        return "-"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if sd else f"{mean:.{digits}f}"


def number(value, digits=2, signed=False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


# A row's comparison cells read its typed comparison (``row.comparisons[split]``, ``stats.Comparison``)
# and its own verdict on a metric and split (``row.verdicts[(metric, split)]``, ``stats.Verdict``).
def p_cell(row, split: str = "test") -> str:
    """sacreBLEU's sentence-only paired test: its p as a number (no mark: the verdict marks)."""
    p = row.comparisons[split].p_value
    return "-" if p is None else f"{p:.4f}"


def decided(row, metric: str = "bleu", split: str = "test") -> bool:
    return row.verdicts[(metric, split)].verdict in (BETTER, WORSE)


def delta_cell(row, metric: str = "bleu", split: str = "test") -> str:
    """Δ, with * where the verdict (over seeds and sentences, Holm-adjusted) is better or worse."""
    text = number(getattr(row.comparisons[split], f"delta_{metric}"), signed=True)
    return text + ("*" if decided(row, metric, split) else "")


def level_text(level: float) -> str:
    """A coverage as the table says it: 95%, 97.5%, 98.3%."""
    return f"{100 * level:.3g}%"


def other_level(verdict) -> bool:
    """Whether a verdict's interval is at a level other than the fixed test's 95% (a sequential row's
    repeated CI at its row's level): its cell then says its level."""
    level = verdict.delta_ci_level
    return verdict.delta_ci_low is not None and level is not None and abs(level - (1 - ALPHA)) > 1e-9


def delta_ci_cell(row, metric: str = "bleu", split: str = "test") -> str:
    verdict = row.verdicts[(metric, split)]
    if verdict.delta_ci_low is None:
        return "-"
    level = f" ({level_text(verdict.delta_ci_level)})" if other_level(verdict) else ""
    return f"[{verdict.delta_ci_low:+.2f}, {verdict.delta_ci_high:+.2f}]{level}"


def ci_header(report, label: str, metric: str = "bleu", split: str = "test") -> str:
    """``Δ 95% CI``, or ``Δ CI (95% or as marked)`` where a row's interval is at another level."""
    marked = any(other_level(r.verdicts[(metric, split)]) for r in report.rows if (metric, split) in r.verdicts)
    return f"{label} CI ({level_text(1 - ALPHA)} or as marked)" if marked else f"{label} {level_text(1 - ALPHA)} CI"


def p_seeds_cell(row, metric: str = "bleu", split: str = "test") -> str:
    p = row.verdicts[(metric, split)].p_seeds_holm
    return "-" if p is None else f"{p:.4f}"


def verdict_cell(row, metric: str = "bleu", split: str = "test") -> str:
    text = row.verdicts[(metric, split)].verdict or "-"
    return "baseline" if text == "n/a: baseline" else text


METRIC_LABEL = {"bleu": "BLEU", "chrf": "chrF++"}


def question(primary: str) -> str:
    metric, split = PRIMARIES[primary]
    return f"{METRIC_LABEL[metric]} on the {split} split"


def verdict_header(report, label: str, metric: str = "bleu", split: str = "test") -> str:
    """A verdict column's header says whether it answers the table's primary question."""
    return f"{label} ({'primary' if PRIMARIES[report.settings.primary] == (metric, split) else 'secondary'})"


def score_text(score) -> str:
    """A ``scores.MeanSd`` as its cell: ``31.23 ± 0.51``."""
    return mean_sd_text(score.mean, score.sd)


def ci_cell(ci) -> str:
    """A ``scores.Interval``; † marks a bootstrap over one seed's sentences."""
    if ci.low is None:
        return "-"
    mark = "†" if ci.kind == "bootstrap" else ""
    return f"[{ci.low:.2f}, {ci.high:.2f}]{mark}"


def seeds_ok_cell(scores) -> str:
    marks = [f"{len(seeds)} {what}" for seeds, what in ((scores.time_capped, "time-capped"),
                                                         (scores.resumed_inexactly, "resumed inexactly")) if seeds]
    return f"{scores.seeds_ok} ({', '.join(marks)})" if marks else str(scores.seeds_ok)


def identity_cells(row) -> list:
    return [PLACEMENT_LABEL.get(v, v) if k == "placement" else v for k, v in row.identity.items()]


def identity_headers(report) -> list:
    return ["position embeddings" if k == "placement" else k for k in report.rows[0].identity] if report.rows else []


# -- the tables of one sweep ------------------------------------------------------------------
def scores_table(report):
    headers = identity_headers(report) + ["paper Δ BLEU", "valid PPL", "BLEU (sacreBLEU)", "BLEU 95% CI", "Δ BLEU",
                                          ci_header(report, "Δ"), "p seeds (Holm)", verdict_header(report, "verdict"),
                                          "p sentences only", "chrF++", "Δ chrF++",
                                          verdict_header(report, "verdict chrF++", "chrf"), "BLEU (tokenized)",
                                          "seeds ok", "not ok"]
    body = []
    for row in report.rows:
        s = row.scores
        test = s.split("test")
        body.append(identity_cells(row) + [
            number(row.paper.delta, digits=1, signed=True), score_text(s.valid_ppl),
            score_text(test.bleu), ci_cell(s.bleu_ci), delta_cell(row), delta_ci_cell(row), p_seeds_cell(row),
            verdict_cell(row), p_cell(row), score_text(test.chrf), delta_cell(row, "chrf"),
            verdict_cell(row, "chrf"), score_text(test.tok_bleu), seeds_ok_cell(s), str(len(s.not_ok))])
    return headers, body


def length_table(report):
    long = ["BLEU long split", "Δ long", ci_header(report, "Δ long", "bleu", "test_long"),
            verdict_header(report, "verdict long", "bleu", "test_long"),
            "p long sentences only", "chrF++ long", "BLEU long (tokenized)"] if report.has_long else []
    headers = identity_headers(report) + [f"BLEU {label}" for label in report.bucket_labels] + ["BLEU (test)"] + long
    body = []
    for row in report.rows:
        long = row.scores.split("test_long")
        cells = identity_cells(row) + [number(row.by_length.bleu.get(label)) for label in report.bucket_labels]
        cells.append(score_text(row.scores.split("test").bleu))
        if report.has_long:
            cells += [score_text(long.bleu), delta_cell(row, "bleu", "test_long"),
                      delta_ci_cell(row, "bleu", "test_long"), verdict_cell(row, "bleu", "test_long"),
                      p_cell(row, "test_long"), score_text(long.chrf), score_text(long.tok_bleu)]
        body.append(cells)
    return headers, body


def scores_notes(report) -> list:
    s = report.settings
    key, value = s.baseline
    same = ", ".join(k for k in (report.rows[0].identity if report.rows else []) if k != key)
    signatures = sorted({str(c.record.bleu_signature) for r in report.rows for c in r.ok_cells()
                         if c.record.bleu_signature})
    tokenized = any(on_tokenized_text(sig) for sig in signatures)
    notes = [
        ("BLEU: sacreBLEU on tokenized text where the signature says text:tokenized (a data-bin scored against its "
         "own targets, subword marks removed: not comparable with BLEU on detokenized output), else on detokenized "
         "output " if tokenized else "BLEU: sacreBLEU on detokenized output ")
        + f"({'; '.join(signatures) or 'no signature recorded'}); "
        "mean ± sample standard deviation over the seeds that finished. BLEU 95% CI: of the row's mean over "
        "seeds, mean ± t(0.975, n-1)·sd/√n; † one seed: sacreBLEU's bootstrap over the test sentences "
        "(1000 resamples) instead. chrF++: sacreBLEU's chrF with word bigrams (CHRF(word_order=2), "
        "`sacrebleu -m chrf --chrf-word-order 2`), mean ± sd over seeds, computed from the outputs where a "
        "record predates it.",
        f"Δ: row minus its baseline ({key}={value}, same {same}), the mean over the paired seeds (those with "
        "outputs on both sides; where a row cannot be tested, those both finished) of the per-seed differences "
        "(seed s against the baseline's seed s); its CI and verdict come from the same seeds. Verdict, * on Δ: "
        "a paired t-test over those seeds whose variance covers both the spread over seeds and the test set's "
        "sampling of sentences (se² = sd of the per-seed differences² / n + the variance of Δ over test "
        "sentences, one draw shared by all seeds; t with Welch-Satterthwaite degrees of freedom, the seeds' "
        f"part at its {DF_GUARD:.0%} upper limit), Holm-adjusted over the rows compared "
        f"with the same baseline (p seeds (Holm)); better / worse at adjusted p < {ALPHA}, else no evidence; "
        "it needs two paired seeds. Δ 95% CI: from the same t, not adjusted: a verdict of better or worse always "
        "has a CI that excludes 0; with several rows a CI can exclude 0 while Holm still says no evidence. "
        "The calibration (results/significance_calibration.md) measures its false-positive rate and power.",
        f"Primary question: {question(s.primary)} (CSV verdict; set with --primary). Every other verdict column "
        "is secondary: each is Holm-adjusted over its own rows, not with the primary, so a secondary better or "
        "worse is a lead to follow up, not a finding of this table.",
        f"p sentences only: sacreBLEU's {TESTS[s.test]} (sacrebleu.significance.PairedTest, as "
        f"`sacrebleu --paired-{s.test}`), {s.samples} {'resamples' if s.test == 'bs' else 'trials'}, two-sided, on "
        "the paired seeds' outputs concatenated, as many papers report it. It treats the trained models as fixed: "
        "it does not cover the spread over seeds, so it says nothing about another seed and marks nothing here"
        + (f"; signature {report.test_signature}." if report.test_signature else "."),
        f"Paper Δ BLEU: the paper's own difference for the same comparison (the paper's row minus its "
        f"{key}={value} row), {WHERE}; the papers' absolute scores (CSV paper_bleu, paper_ppl) are on other test "
        "sets and are not comparable with ours. " + " ".join(f"{k}: {v}." for k, v in SOURCES.items()),
    ]
    notes += [f"Seeds of {' '.join(map(str, row.identity.values()))}{'' if split == 'test' else ' (' + split + ')'}: "
              f"Δ, CI and verdict over seeds {', '.join(map(str, cmp.delta_seeds))} only; "
              f"seed {', '.join(map(str, cmp.delta_seeds_left_out))} left out ({cmp.p_note or cmp.delta_seeds_why})"
              for row in report.rows for split, cmp in row.comparisons.items() if cmp.delta_seeds_left_out]
    return notes + devices_note(report)


def devices_note(report) -> list:
    """What trained the finished cells (their records' ``device``: ``cpu``, ``cuda: NVIDIA H200 x1``):
    one line, so a table says which machine its numbers come from."""
    count = {}
    for cell in report.sweep.cells:
        if is_ok(cell.record) and cell.record.device:
            count[cell.record.device] = count.get(cell.record.device, 0) + 1
    if not count:
        return []
    return ["Trained on: " + "; ".join(f"{device} ({n} cell{'s' * (n != 1)})" for device, n in sorted(count.items()))
            + " (each cell's result.json: device; its provenance.json: the CPU and GPUs of its machine)."]


def power_table(report):
    s = report.settings
    size = f"{s.test_size} sentences" if s.test_size else "this test set"
    headers = identity_headers(report) + ["pilot seeds", "test sentences", "sd: seeds", "sd: sentences per seed",
                                          "sd: sentences shared", "mde BLEU", f"seeds to book for Δ = ±{s.effect:g} "
                                          f"at {size}", "plug-in (optimistic)"]
    body = []
    stopped = stopped_rows(report.rows, report.sweep)
    for row in report.rows:
        v, test = row.power, row.tests.get(("bleu", "test"))
        if test is None:
            continue
        # A row its sequential design stopped books no seeds: its verdict is frozen at the stop.
        book = [f"none: decided ({short_stop(stopped[id(row)])})", "-"] if id(row) in stopped else \
            [str(plan_value(v.seeds_needed)), str(plan_value(v.seeds_needed_low))]
        body.append(identity_cells(row) + [str(v.pilot_seeds), str(test.sentences), number(v.seed_sd),
                                           number(v.sentence_sd), number(v.shared_sd), number(v.mde_bleu), *book])
    return headers, body


def power_notes(report) -> list:
    s = report.settings
    scaled = (f" on {s.test_size} test sentences (the sentence parts scaled by the size ratio, their sd by its square "
              "root)") if s.test_size else ""
    notes = [f"Power planning for the verdict's test at α = {ALPHA}, {POWER:.0%} power, from each row's own variance "
             "components of a per-seed difference (sd of BLEU): the seeds' own effect, the sentence noise that differs "
             "from seed to seed, and the test-set sampling all seeds share (which more seeds never remove). "
             "mde BLEU: the smallest |Δ| the verdict finds with "
             f"{POWER:.0%} power at the row's seeds and test set, the pilot's spread taken as it is. Seeds to book for "
             f"|Δ| = {s.effect:g}{scaled}: planned with the pilot's spread over seeds at its {PLAN_LEVEL:.0%} upper "
             "confidence limit, so that the seeds booked deliver their power on average over what a pilot of this "
             "size could have shown; plug-in: the same plan if the pilot's spread were the truth, the optimistic end. "
             "Set with posenc-table --power [--effect D] [--test-size M]; checked by simulating pilots and the seeds "
             "they book in results/significance_calibration.md."
             + (" A row its sequential design has stopped books none: its verdict is frozen at that stop."
                if stopped_rows(report.rows, report.sweep) else "")]
    notes += [f"{' '.join(map(str, row.identity.values()))}: {row.power.advice}."
              for row in report.rows if row.power is not None and row.power.advice]
    return notes


def length_notes(report) -> list:
    s = report.settings
    edges = ",".join(map(str, report.bucket_edges)) + ("" if s.edges else " by default for this corpus")
    sizes = "; ".join(f"{corpus}: " + ", ".join(f"{label} {n}" for label, n in zip(report.bucket_labels, counts))
                      for corpus, counts in report.bucket_sizes.items()) or "no test outputs to bucket"
    notes = [f"BLEU by source length on the test split: each sentence in exactly one bucket of source words "
             f"(whitespace tokens of the raw source; edges {edges}, set with --buckets); BLEU of each bucket's "
             f"sentences per seed, averaged over seeds. Sentences per bucket: {sizes}."]
    if report.has_long:
        notes.append("Long split: test_long, sentences longer than every training sentence; Δ, its CI, the "
                     "verdict (Holm over the long split's rows) and p as on the test split.")
    return notes


def status_notes(report) -> list:
    sweep = report.sweep
    lines = []
    for cell in sweep.cells:
        rec = cell.record
        if not is_ok(rec):
            lines.append(f"{str(status_of(rec)).upper()} {cell.name}: {error_of(rec) or 'no error recorded'}")
        elif time_capped(rec):
            lines.append(f"TIME-CAPPED {cell.name}: training stopped at budget.max_time_min after "
                         f"{rec.num_updates} updates, in epoch {rec.epochs}, before its planned "
                         "epochs; its scores depend on the machine's speed (a rerun with "
                         "budget.max_time_min=0 trains it in full)")
        if is_ok(rec) and inexact_resume(rec):
            why = f"inexactly ({rec.resume_inexact_reason})" if rec.resume_inexact_reason else \
                "without the random states and first-epoch batches an exact resume restores (a version before issue 48)"
            lines.append(f"RESUMED INEXACTLY {cell.name}: resumed from update {rec.resumed_from_update} {why}: close "
                         "to an uninterrupted run, not equal; a rerun with redo=inexact retrains it from scratch")
    lines += [f"MISSING {name}: planned, never reported" for name in sweep.missing]
    lines += [f"UNREADABLE {name}/{RESULT_FILE}: {why}" for name, why in sweep.unreadable]
    if (sweep.dir / PLAN_FILE).exists() and not sweep.planned:
        lines.append(f"PLAN UNREADABLE: {sweep.plan_note}")
    lines += [f"SKIPPED {name}: {why}" for name, why in sweep.skipped]
    return lines + [f"WARNING {w}" for w in report.warnings]


# -- output formats -----------------------------------------------------------------------------
def markdown(headers, body) -> str:
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "±": r"$\pm$", "Δ": r"$\Delta$", "†": r"$^\dagger$", "‡": r"$^\ddagger$", "√": r"$\surd$",
                 "·": r"$\cdot$", "²": r"$^2$", "α": r"$\alpha$"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def latex(headers, body, left: int) -> str:
    """A booktabs tabular: the first ``left`` columns (names) left-aligned, the numbers right-aligned."""
    spec = "l" * left + "r" * (len(headers) - left)
    lines = [r"\begin{tabular}{" + spec + "}", r"\toprule", " & ".join(map(latex_escape, headers)) + r" \\",
             r"\midrule"]
    lines += [" & ".join(map(latex_escape, cells)) + r" \\" for cells in body]
    return "\n".join(lines + [r"\bottomrule", r"\end{tabular}"]) + "\n"


def _block(fmt, headers, body, notes, left=1) -> str:
    if fmt == "latex":
        return latex(headers, body, left) + "".join(f"% {latex_escape(n)}\n" for n in notes)
    return markdown(headers, body) + "\n" + "".join(f"{n}\n\n" for n in notes)


def render_report(report, fmt: str = "md", title: bool = False) -> str:
    if fmt == "csv":
        return csv_text(as_dicts(report)) + "".join(f"# {n}\n" for n in status_notes(report))
    head = ""
    if title:
        head = f"% Sweep {report.sweep.dir}\n" if fmt == "latex" else f"### Sweep `{report.sweep.dir}`\n\n"
    status = status_notes(report)
    prefix = "% " if fmt == "latex" else ""
    if not report.rows:
        return head + f"{prefix}No cell of this sweep has a readable result yet.\n" + \
            "".join(prefix + (latex_escape(s) if fmt == "latex" else s) + "\n" for s in status)
    left = len(identity_headers(report))
    parts = [head + _block(fmt, *scores_table(report), scores_notes(report), left),
             _block(fmt, *length_table(report), length_notes(report), left)]
    if report.settings.power and power_table(report)[1]:
        parts.append(_block(fmt, *power_table(report), power_notes(report), left))
    if is_tuned(report.sweep):
        parts.append(_block(fmt, *tune_table(report), tune_notes(report)))
    elif report.sweep.strategy:  # a seeds strategy's rows
        parts.append(_block(fmt, *strategy_table(report), strategy_notes(report)))
    if status:
        parts.append("".join(prefix + (latex_escape(s) if fmt == "latex" else s) + "\n" for s in status))
    return "\n".join(parts)


def render_trials(sweeps, fmt: str = "md") -> str:
    """``posenc-table --trials``: every tuning trial of each tune strategy's sweep."""
    parts = []
    for sweep in sweeps:
        if not is_tuned(sweep):
            raise ValueError(f"{sweep.dir}: not a tune strategy's sweep (hydra/sweeper=posenc_tune); it has no trials")
        headers, body = trials_table(sweep)
        if fmt == "csv":
            parts.append(csv_text([dict(zip(headers, cells)) for cells in body]))
        else:
            title = f"% Trials of {sweep.dir}\n" if fmt == "latex" else f"### Trials of `{sweep.dir}`\n\n"
            parts.append(title + _block(fmt, headers, body, []))
    return "\n".join(parts)


def csv_text(dicts) -> str:
    columns = list(dict.fromkeys(k for d in dicts for k in d)) or ["placement"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: ("" if d.get(k) is None else d.get(k)) for k in columns})
    return out.getvalue()


# -- several sweeps ---------------------------------------------------------------------------------
def side_by_side(reports):
    """One line per value of the baseline key; for each sweep (and each of its other configurations)
    its BLEU, Δ and p against its own baseline, and the long split's BLEU where it has one."""
    key = reports[0].settings.baseline[0]
    columns, levels = [], {}
    for report in reports:
        groups = {}
        for row in report.rows:
            rest = tuple(v for k, v in row.identity.items() if k != key)
            groups.setdefault(rest, {})[row.identity[key]] = row
            levels.setdefault(row.identity[key], None)
        for rest, by_level in groups.items():
            label = report.sweep.label + ("" if len(groups) == 1 else " " + " ".join(rest))
            columns.append((label, by_level, report.has_long))
    ordered = sorted(levels, key=lambda lv: order_key(key, lv))
    headers = ["position embeddings" if key == "placement" else key]
    for label, _, has_long in columns:
        headers += [f"{label} BLEU", f"{label} Δ", f"{label} verdict"] + ([f"{label} BLEU long"] if has_long else [])
    body = []
    for level in ordered:
        cells = [PLACEMENT_LABEL.get(level, level) if key == "placement" else level]
        for _, by_level, has_long in columns:
            row = by_level.get(level)
            if row is None:
                cells += ["-", "-", "not in this sweep"] + (["-"] if has_long else [])
                continue
            cells += [score_text(row.scores.split("test").bleu), delta_cell(row), verdict_cell(row)]
            if has_long:
                cells.append(score_text(row.scores.split("test_long").bleu))
        body.append(cells)
    return headers, body


def render_reports(reports, fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r} is not allowed; allowed: {', '.join(FORMATS)}")
    if len(reports) == 1:
        return render_report(reports[0], fmt)
    if fmt == "csv":
        return csv_text([d for r in reports for d in as_dicts(r)]) + \
            "".join(f"# {r.sweep.label}: {n}\n" for r in reports for n in status_notes(r))
    note = ("Side by side: each sweep's rows against its own baseline; mean ± sd over seeds; Δ and the verdict "
            "(* on Δ) as in each sweep's own table below.")
    parts = [_block(fmt, *side_by_side(reports), [note])]
    parts += [render_report(r, fmt, title=True) for r in reports]
    return "\n".join(parts)
