"""A sweep's cells as the Table 4 layout: placement rows, the paper's numbers beside ours."""

import csv
import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from posenc.atomic import write_text_atomic
from posenc.report.records import FIELDS, RESULT_FILE
from posenc.report.plan import planned_cells

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference" / "convs2s_table4.csv"
PLACEMENT_ORDER = ("both", "source", "target", "none")
PLACEMENT_LABEL = {"both": "both (encoder and decoder)", "source": "source (encoder) only",
                   "target": "target (decoder) only", "none": "neither"}


class SweepError(ValueError):
    """A sweep directory the table cannot be made from; the message is one line."""


@dataclass
class Sweep:
    records: list                                  # one per cell that reported
    missing: list = field(default_factory=list)    # planned cells without a result.json
    unreadable: list = field(default_factory=list)  # result.json files that could not be read


def load_sweep(sweep_dir: Path) -> Sweep:
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise SweepError(f"{sweep_dir}: no such sweep directory")
    sweep = Sweep(records=[])
    for path in sorted(sweep_dir.rglob(RESULT_FILE)):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            record["_cell"] = str(path.parent.relative_to(sweep_dir))
            sweep.records.append(record)
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as err:
            sweep.unreadable.append(f"{path}: {type(err).__name__}")
    reported = {r["_cell"] for r in sweep.records}
    for cell in planned_cells(sweep_dir) or []:
        if not cell.skip_reason and cell.dirname not in reported:
            sweep.missing.append(cell.dirname)
    if not sweep.records and not sweep.missing:
        raise SweepError(f"{sweep_dir}: no {RESULT_FILE} below it and no multirun.yaml plan")
    return sweep


def reference_rows() -> dict:
    with open(REFERENCE, newline="", encoding="utf-8") as handle:
        return {row["placement"]: row for row in csv.DictReader(handle)}


def _mean_sd(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def table_rows(sweep: Sweep) -> list:
    """One row per (model, pe, data, placement) group, in Table 4 order."""
    groups = {}
    for rec in sweep.records:
        groups.setdefault((rec.get("model"), rec.get("pe"), rec.get("data"), rec.get("placement")), []).append(rec)
    ref = reference_rows()
    rows = []
    order = {p: i for i, p in enumerate(PLACEMENT_ORDER)}
    for (model, pe, data, placement), recs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]), str(kv[0][2]), order.get(kv[0][3], 9))):
        ok = [r for r in recs if r.get("status") == "ok"]
        bleu, bleu_sd = _mean_sd([r.get("bleu") for r in ok])
        tok, tok_sd = _mean_sd([r.get("tok_bleu") for r in ok])
        ppl, ppl_sd = _mean_sd([r.get("valid_ppl") for r in ok])
        paper = ref.get(placement, {})
        rows.append({
            "model": model, "pe": pe, "data": data, "placement": placement,
            "paper_valid_ppl": paper.get("valid_ppl", ""), "paper_bleu": paper.get("bleu", ""),
            "valid_ppl": ppl, "valid_ppl_sd": ppl_sd, "bleu": bleu, "bleu_sd": bleu_sd,
            "tok_bleu": tok, "tok_bleu_sd": tok_sd, "seeds_ok": len(ok), "failed": len(recs) - len(ok),
        })
    return rows


def _fmt(mean, sd, digits=2):
    if mean is None:
        return "-"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if sd else f"{mean:.{digits}f}"


HEADERS = ["model", "pe", "data", "position embeddings", "paper valid PPL", "paper BLEU", "valid PPL",
           "BLEU (sacreBLEU)", "BLEU (tokenized)", "seeds ok", "failed"]


def _cells(row):
    return [row["model"], row["pe"], row["data"], PLACEMENT_LABEL.get(row["placement"], row["placement"]),
            row["paper_valid_ppl"], row["paper_bleu"], _fmt(row["valid_ppl"], row["valid_ppl_sd"]),
            _fmt(row["bleu"], row["bleu_sd"]), _fmt(row["tok_bleu"], row["tok_bleu_sd"]), str(row["seeds_ok"]),
            str(row["failed"])]


def render(sweep: Sweep, fmt: str = "md") -> str:
    rows = table_rows(sweep)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["placement"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue() + _notes(sweep, prefix="# ")
    if fmt == "latex":
        lines = [r"\begin{tabular}{llll" + "r" * 7 + "}", r"\toprule", " & ".join(HEADERS) + r" \\", r"\midrule"]
        lines += [" & ".join(c.replace("±", r"$\pm$").replace("_", r"\_") for c in _cells(r)) + r" \\" for r in rows]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n" + _notes(sweep, prefix="% ")
    if fmt != "md":
        raise SweepError(f"--format {fmt!r} is not allowed; allowed: md, csv, latex")
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    note = ("\nPaper: Gehring et al. (2017), Table 4 (WMT'14 En-De, tokenized BLEU, mean of 3 runs). "
            "Ours: mean ± sample standard deviation over seeds that finished.\n")
    return "\n".join(lines) + "\n" + note + _notes(sweep, prefix="")


def _notes(sweep: Sweep, prefix: str) -> str:
    lines = []
    for rec in sweep.records:
        if rec.get("status") != "ok":
            status = "INTERRUPTED" if rec.get("status") == "interrupted" else "FAILED"
            lines.append(f"{prefix}{status} {rec['_cell']}: {rec.get('error') or 'no error recorded'}")
    lines += [f"{prefix}MISSING {name}: planned, never reported" for name in sweep.missing]
    lines += [f"{prefix}UNREADABLE {name}" for name in sweep.unreadable]
    return ("\n".join(lines) + "\n") if lines else ""


def results_csv(sweep: Sweep) -> str:
    """One line per cell that reported: the contract's fields first, then any extras."""
    extras = sorted({k for r in sweep.records for k in r if k not in FIELDS and not k.startswith("_")
                     and not isinstance(r[k], (dict, list))})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(FIELDS) + extras, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for rec in sweep.records:
        writer.writerow({k: ("" if rec.get(k) is None else rec.get(k)) for k in list(FIELDS) + extras})
    return out.getvalue()


def write_sweep_tables(sweep_dir: Path) -> str:
    """Write ``results.csv`` and ``table.md`` into the sweep directory; return the table."""
    sweep = load_sweep(sweep_dir)
    table = render(sweep, "md")
    write_text_atomic(Path(sweep_dir) / "results.csv", results_csv(sweep))
    write_text_atomic(Path(sweep_dir) / "table.md", table)
    return table
