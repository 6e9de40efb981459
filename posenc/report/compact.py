"""The answer first: one compact table per sweep, at most ``WIDTH`` columns wide and one line per
row: the row, BLEU mean ± sd over seeds, Δ against the baseline with its interval, the verdict (for
a row of the sequential seeds strategy: where and why it stopped) and the seeds; where a paper
measured the same comparison (``references``), its Δ beside ours, the caption naming the paper and its
test set. A sweep's end
prints it last, before the path of ``table.md``, which keeps every table and note; ``posenc-table
--compact`` prints it for any sweep. Long cells (a row label of many keys, a long verdict) are cut
with "…" (a label in its middle) so that a line never wraps in a terminal of ``WIDTH`` columns."""

import re

from posenc.metrics import on_tokenized_text
from posenc.report.references import CAPTIONS
from posenc.report.render import delta_cell, delta_ci_cell, number, other_level, score_text, seeds_ok_cell, verdict_cell
from posenc.report.rows import baselines
from posenc.report.sequential import adaptive_states, short_stop

WIDTH = 100
AT_SEEDS = re.compile(r" (at|after) \d+ seeds$")   # where a sequential row stopped, when the seeds column must say it
HEADERS = ["row", "BLEU", "Δ [CI]", "verdict", "seeds"]
PAPER = "paper Δ"        # after "Δ [CI]", in a sweep where a paper measured some row's comparison
LABEL, VERDICT = 0, -2   # the columns cut to fit, the verdict first: the row label tells rows apart
KEEP = 16                # each keeps this much while the other can give way
MIN_WIDTH = 10           # neither is cut below this while a number column can be
LAST_WIDTH = 5           # nor any column below this, should the numbers alone not fit


def row_keys(report) -> list:
    """The keys that tell the rows apart; a sweep of one row: its baseline key (or its last key)."""
    rows = report.rows
    keys = [k for k in (rows[0].identity if rows else {}) if len({r.identity.get(k) for r in rows}) > 1]
    if not keys and rows:
        key = report.settings.baseline[0]
        keys = [key] if key in rows[0].identity else list(rows[0].identity)[-1:]
    return keys


def short_key(key: str) -> str:
    """``model.args.dropout`` -> ``dropout``, ``+optim.args.lr`` -> ``lr``."""
    return key.lstrip("+").rsplit(".", 1)[-1]


def row_labels(report, style: str = "keys") -> list:
    """Each row by the keys that tell it from the others: ``keys``: ``pe=rope placement=source``;
    ``short``: each key by its last dotted part (``dropout=0.1``); ``values``: the values alone
    (``0.1 rope source``), the keys then named once above the table."""
    keys = row_keys(report)
    if style == "values":
        return [" ".join(str(row.identity.get(k)) for k in keys) for row in report.rows]
    name = short_key if style == "short" else str
    return [" ".join(f"{name(k)}={row.identity.get(k)}" for k in keys) for row in report.rows]


def label_style(report, headers, body) -> str:
    """The first style of row label that fits whole: ``keys``, ``short`` (where the keys' last parts
    still tell them apart), else ``values``."""
    keys = row_keys(report)
    styles = ["keys"] + (["short"] if len({short_key(k) for k in keys}) == len(keys) else []) + ["values"]
    for style in styles:
        trial = [[label, *cells[1:]] for label, cells in zip(row_labels(report, style), body)]
        if fit(headers, trial)[LABEL] >= max(len(cells[0]) for cells in trial):
            return style
    return "values"


def verdict_text(row, state) -> str:
    """BLEU's own verdict, ``n/a`` reasons without their parenthesis; an adaptive row's stop."""
    if state is not None:
        return short_stop(state)
    text = verdict_cell(row)
    return text.split(" (")[0] if text.startswith("n/a") else text


def delta_text(row, baseline: bool) -> str:
    if baseline:
        return "baseline"
    delta, ci = delta_cell(row), delta_ci_cell(row)
    return delta if ci == "-" else f"{delta} {ci}"


def paper_sources(report) -> list:
    """The papers whose own Δ stands beside some row of ``report``, in the order of its rows."""
    return list(dict.fromkeys(row.paper.source for row in report.rows if row.paper.delta is not None))


def headers_of(report) -> list:
    return HEADERS[:3] + [PAPER] + HEADERS[3:] if paper_sources(report) else HEADERS


def compared_rows(report) -> set:
    """``id`` of each row another row is compared with. A row that is its group's baseline with
    nothing to compare (every row of a sweep over dropout has placement=both) is not one."""
    bases = baselines(report.rows, report.settings.baseline)
    return {id(base) for key, base in bases.items() if base is not None and id(base) != key}


def row_cells(row, compared: set, state) -> list:
    """A row's Δ and verdict cells: ``baseline`` where others are compared with it, its statuses
    where no seed finished (a failed row is shown failed, never as a baseline), else its comparison."""
    if not row.scores.seeds_ok:
        return ["-", ", ".join(dict.fromkeys(n.split(" ", 2)[-1] for n in row.scores.not_ok)) or "no seed"]
    if row.comparisons["test"].p_note == "baseline":
        return ["baseline", "baseline"] if id(row) in compared else ["-", "-"]
    return [delta_text(row, False), verdict_text(row, state)]


def seeds_text(scores) -> str:
    not_ok = len(scores.not_ok)
    return seeds_ok_cell(scores) + (f", {not_ok} not ok" if not_ok else "")


def compact_rows(report) -> tuple:
    """The compact table's cells, one list per row of ``report``, and the style of its row labels
    (``label_style``): a label too long to fit names its keys shorter, or only once above the table,
    rather than being cut where it tells the rows apart."""
    states = adaptive_states(report.rows, report.sweep)
    headers, paper = headers_of(report), bool(paper_sources(report))
    compared = compared_rows(report)
    body = []
    for label, row in zip(row_labels(report), report.rows):
        delta, verdict = row_cells(row, compared, states.get(id(row)))
        cells = [label, score_text(row.scores.split("test").bleu), delta]
        cells += [number(row.paper.delta, digits=1, signed=True)] if paper else []
        body.append(cells + [verdict, seeds_text(row.scores)])
    style = label_style(report, headers, body) if body else "keys"
    for cells, label in zip(body, row_labels(report, style)):
        cells[0] = label
    if body and fit(headers, body)[VERDICT] < max(len(cells[VERDICT]) for cells in body):
        # A stop too long to fit whole: why it stopped; where is the seeds column, unless the row
        # stopped at fewer seeds than it ran (a retest at an earlier look): that stop keeps its n.
        for cells, row in zip(body, report.rows):
            where = AT_SEEDS.search(cells[VERDICT]) if id(row) in states else None
            if where:
                n = where.group(0).split()[1]
                cells[VERDICT] = AT_SEEDS.sub("" if n == str(row.scores.seeds_ok) else f" at {n}", cells[VERDICT])
    return body, style


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def cut_middle(text: str, width: int) -> str:
    """A row label keeps both ends (its first key and its placement), the middle gives way."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def fit(headers, body, width: int = WIDTH) -> list:
    """Column widths of an aligned Markdown table of ``headers`` and ``body`` that fits ``width``.
    What gives way, in turn, until the lines fit: the verdict down to KEEP characters, then the row
    label down to KEEP, then the widest of the two down to MIN_WIDTH, and only should the numbers
    alone not fit, the widest column of all, down to LAST_WIDTH. Every line is then at most
    ``width`` columns."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *body)]
    frame = 3 * (len(widths) - 1) + 4  # "| " + " | " between cells + " |"
    verdict = len(widths) + VERDICT
    for columns, least in (((verdict,), KEEP), ((LABEL,), KEEP), ((LABEL, verdict), MIN_WIDTH),
                           (range(len(widths)), LAST_WIDTH)):
        while sum(widths) + frame > width:
            shrinkable = [i for i in columns if widths[i] > least]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def aligned(headers, body, widths) -> list:
    def line(cells):
        return "| " + " | ".join((cut_middle if i == LABEL else cut)(str(c), w).ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    return [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(cells) for cells in body]


def caption(report, style: str = "keys") -> list:
    """What the numbers are, in a line or three of at most WIDTH columns."""
    key, value = report.settings.baseline
    marked = any(other_level(r.verdicts[("bleu", "test")]) for r in report.rows if ("bleu", "test") in r.verdicts)
    # A sequential row's interval is its repeated CI at its row's level, marked with that level.
    level, star = ("CI: 95% or as marked", "*: better/worse") if marked else \
        ("95% CI", "* where the verdict is better/worse")
    lines = [f"BLEU: mean ± sd over seeds; Δ against {key}={value} [{level}], {star}" if compared_rows(report) else
             f"BLEU: mean ± sd over seeds; no Δ: no two rows differ in {key} alone (see --baseline)"]
    if style == "values":
        lines.append("row: " + " ".join(row_keys(report)))
    if adaptive_states(report.rows, report.sweep):
        lines.append("A sequential row: Δ and its repeated CI at the look it stopped at, why, and the seeds it ran")
    lines += [f"paper Δ: {CAPTIONS[source]}" for source in paper_sources(report)]
    if any(on_tokenized_text(c.record.bleu_signature) for r in report.rows for c in r.ok_cells()):
        lines.append("BLEU on tokenized text: the data-bin's own targets, subword marks removed (text:tokenized)")
    return [cut(line, WIDTH) for line in lines]


def compact_table(report) -> str:
    """One sweep's compact table: a caption line or three, then the aligned table; every line <= WIDTH."""
    if not report.rows:
        return "No cell of this sweep has a readable result yet.\n"
    body, style = compact_rows(report)
    headers = headers_of(report)
    lines = caption(report, style) + aligned(headers, body, fit(headers, body))
    return "\n".join(lines) + "\n"


def compact_text(reports) -> str:
    """``posenc-table --compact``: each sweep's compact table, under its directory where there are several."""
    if len(reports) == 1:
        return compact_table(reports[0])
    return "\n".join(cut(f"Sweep {r.sweep.dir}", WIDTH) + "\n" + compact_table(r) for r in reports)
