"""CSV, markdown and figures of the commands with one row per item: ``bases`` (one row per
base) and ``sweep`` (one row per cell). Files are written atomically."""

import csv
import io
import os

from posenc.analysis import plots
from posenc.analysis.writeup import fmt, write_json
from posenc.atomic import write_text_atomic


def _csv(rows, columns) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return out.getvalue()


def _md_table(rows, columns) -> list:
    """``columns``: ``(header, row -> cell text)``."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for _, get in columns:
            try:
                cells.append(get(row))
            except (KeyError, TypeError):
                cells.append("n/a")
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


# ---------------------------------------------------------------------------------------------
# bases


def write_bases(report: dict, extras: dict, out_dir: str) -> list:
    from posenc.analysis.bases import COLUMNS

    rows = report["rows"]
    d, n, v = report["dim"], report["max_len"], report["variant"]
    fig = plots.bases_figure(rows, extras, os.path.join(out_dir, "bases.png"),
                             f"what the base does: sinusoid ({v} layout), d={d}, N={n}", n)
    report["figures"] = [os.path.basename(fig)]
    write_text_atomic(os.path.join(out_dir, "bases.csv"),
                      _csv(rows, [k for k, _ in COLUMNS if any(k in r for r in rows)]))
    columns = [(label, (lambda r, k=key: fmt(r[k]))) for key, label in COLUMNS if any(key in r for r in rows)]
    lines = [f"# What the base of the sinusoid changes, d={d}, N={n}, `{v}` layout", "",
             f"Rows PE(0)..PE({n - 1}) for each base b (wavelengths 2*pi .. ~2*pi*b). Every base gives the norm "
             f"sqrt(d/2) = {fmt(report['norm'])} at every position and exact translation invariance of the dot "
             f"product; what changes is below.", ""]
    lines += _md_table(rows, columns)
    lines += ["", "Columns. *Pairs with wavelength > N*: sin/cos pairs that never complete a period inside the table. "
              "*f(m) falls up to offset*: the largest M with f(0) > f(1) > ... > f(M) for the dot-product proximity "
              "f(m) = <PE_x, PE_x+m> = sum_i cos(m w_i) (the same at every x). *Monotonicity*: mean over anchors of "
              "-Spearman(offset, proximity), 1 = falls everywhere. *Probes*: ridge regression to the position (MAE in "
              "positions) and logistic regression for the order of two positions, 5-fold over held-out positions "
              "(Wang & Chen, EMNLP 2020). *3.1 max error*: max |PE(p+k) - M(k) PE(p)| over all p + k < N "
              "with a float32 table (float32 rotations too), and the offset k where it occurs.", "",
              "![bases](bases.png)"]
    write_text_atomic(os.path.join(out_dir, "bases.md"), "\n".join(lines) + "\n")
    write_json(report, out_dir)
    return ["bases.csv", "bases.md", "report.json", *report["figures"]]


# ---------------------------------------------------------------------------------------------
# sweep

SCATTER_PANELS = (("dot_translation_invariance", "translation invariance (dot)"),
                  ("dot_monotonicity_local16", "monotonicity, offsets <= 16 (dot)"),
                  ("abs_position_mae", "absolute position probe MAE"),
                  ("relative_order_error", "relative order probe error"))


def _side_cell(prefix):
    def probe(r):
        mae, chance = r.get(f"{prefix}_abs_position_mae"), r.get(f"{prefix}_abs_position_chance_mae")
        return "n/a" if mae is None else f"{fmt(mae, 3)} ({fmt(chance, 3)})"

    def kind(r):
        k = r.get(f"{prefix}_kind")
        n = r.get(f"{prefix}_positions")
        return "n/a" if k is None else (f"{k} ({n})" if n is not None else k)

    def num(col, digits=3):
        return lambda r: fmt(r.get(f"{prefix}_{col}"), digits)

    return [(f"{prefix}: kind (positions)", kind), (f"{prefix}: norm", num("norm_mean")),
            (f"{prefix}: PE/token norm", num("pe_to_token_norm")),
            (f"{prefix}: TI (dot)", num("dot_translation_invariance")),
            (f"{prefix}: mono16 (dot)", num("dot_monotonicity_local16")),
            (f"{prefix}: abs. MAE (chance)", probe), (f"{prefix}: order error", num("relative_order_error"))]


BIAS_NOTE = (" A side with a relative attention bias (t5, alibi) has no table: its column *relative bias* gives its "
             "heads by locality (local: the bias never rises with |distance key - query|) and b(0) and b(-N), the "
             "bias at distance 0 and N back, over the heads (ALiBi: its fixed slopes); the per-head numbers are in "
             "each cell's report under `relative_bias`.")


def write_sweep(report: dict, rows: list, extras: dict, columns: list, out_dir: str) -> list:
    write_text_atomic(os.path.join(out_dir, "sweep.csv"), _csv(rows, columns))
    references = {}
    for ref in report.get("init_reference", []):
        for suffix, _ in SCATTER_PANELS:
            value = ref["values"].get(suffix)
            if value is not None:
                references.setdefault(f"{'enc' if ref['side'] == 'encoder' else 'dec'}_{suffix}", value)
    figures = [plots.sweep_scatter(rows, os.path.join(out_dir, "sweep_properties.png"),
                                   f"position tables of {os.path.basename(report['sweep'])} against BLEU "
                                   "(one point per cell; dashed: a freshly initialised table)",
                                   SCATTER_PANELS, references)]
    tables = {}
    for name, ex in extras.items():
        for side, e in (ex or {}).items():
            tables[f"{name} {side}"] = e["table"].numpy()
    if tables:
        figures.append(plots.cosine_grid(tables, os.path.join(out_dir, "sweep_cosine.png"),
                                         "cosine similarity of positions, per cell and side"))
    report["figures"] = [os.path.basename(f) for f in figures]
    attn = any(r.get(f"{p}_attn_symmetry") is not None for r in rows for p in ("enc", "dec"))
    md_cols = [("cell", lambda r: f"`{r['cell']}`"), ("status", lambda r: r["status"]),
               ("BLEU", lambda r: fmt(r["bleu"]))]
    md_cols += _side_cell("enc") + _side_cell("dec")
    if attn:
        md_cols += [(f"{p}: attn symmetry", (lambda r, p=p: fmt(r.get(f"{p}_attn_symmetry"), 3)))
                    for p in ("enc", "dec")]
    bias = any(r.get(f"{p}_bias_summary") for r in rows for p in ("enc", "dec"))
    if bias:
        md_cols += [(f"{p}: relative bias", (lambda r, p=p: r.get(f"{p}_bias_summary") or "-")) for p in ("enc", "dec")]
    measured = sum(bool(r["measured"]) for r in rows)
    lines = [f"# Position tables of the sweep `{report['sweep']}`", "",
             f"{len(rows)} cells, {measured} measured from their `checkpoints/checkpoint_best.pt`. A learned table is "
             "measured over the positions training reached (nonzero optimizer state) unless `--max-len` is given; "
             "the properties are of the dot product <PE_x, PE_y> (TI: translation invariance; mono16: monotonicity "
             "over offsets <= 16); probes over held-out positions." + (BIAS_NOTE if bias else ""), ""]
    lines += _md_table(rows, md_cols)
    refs = report.get("init_reference", [])
    if refs:
        lines += ["", "The same measurements on tables that learned nothing (freshly initialised, same shape, mean of "
                  f"{refs[0]['draws']} seeded draws), as the yardstick:", ""]
        ref_rows = []
        for ref in refs:
            prefix = "enc" if ref["side"] == "encoder" else "dec"
            values = {f"{prefix}_{k}": v for k, v in ref["values"].items()}
            ref_rows.append({"cell": f"{ref['side']} init", "status": "-", "bleu": None, **values})
        lines += _md_table(ref_rows, md_cols)
    notes = [f"- `{r['cell']}`: {r['note']}" for r in rows if r.get("note")]
    notes += [f"- {n}" for n in report.get("notes", [])]
    if notes:
        lines += ["", "Notes:"] + notes
    lines += ["", "Every column, for both sides, is in `sweep.csv`; each cell's full checkpoint report is in "
              "`report.json` under `cells`.", ""] + [f"![{os.path.splitext(f)[0]}]({f})" for f in report["figures"]]
    write_text_atomic(os.path.join(out_dir, "sweep.md"), "\n".join(lines) + "\n")
    write_json(report, out_dir)
    return ["sweep.csv", "sweep.md", "report.json", *report["figures"]]


__all__ = ["write_bases", "write_json", "write_sweep"]
