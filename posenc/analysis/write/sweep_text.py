"""``sweep.csv`` and ``sweep.md``: one row per cell of ``posenc-pe sweep``, beside its BLEU, and the
freshly initialised tables' row as the yardstick; written atomically."""

import os

from posenc.analysis.write.format import csv_text, fmt, md_table
from posenc.atomic import write_text_atomic


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


def write_sweep_text(report: dict, rows: list, columns: list, out_dir: str) -> list:
    """After the figures: ``sweep.md`` links ``report["figures"]``."""
    write_text_atomic(os.path.join(out_dir, "sweep.csv"), csv_text(rows, columns))
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
    lines += md_table(rows, md_cols)
    refs = report.get("init_reference", [])
    if refs:
        lines += ["", "The same measurements on tables that learned nothing (freshly initialised, same shape, mean of "
                  f"{refs[0]['draws']} seeded draws), as the yardstick:", ""]
        ref_rows = []
        for ref in refs:
            prefix = "enc" if ref["side"] == "encoder" else "dec"
            values = {f"{prefix}_{k}": v for k, v in ref["values"].items()}
            ref_rows.append({"cell": f"{ref['side']} init", "status": "-", "bleu": None, **values})
        lines += md_table(ref_rows, md_cols)
    notes = [f"- `{r['cell']}`: {r['note']}" for r in rows if r.get("note")]
    notes += [f"- {n}" for n in report.get("notes", [])]
    if notes:
        lines += ["", "Notes:"] + notes
    lines += ["", "Every column, for both sides, is in `sweep.csv`; each cell's full checkpoint report is in "
              "`report.json` under `cells`.", ""] + [f"![{os.path.splitext(f)[0]}]({f})" for f in report["figures"]]
    write_text_atomic(os.path.join(out_dir, "sweep.md"), "\n".join(lines) + "\n")
    return ["sweep.csv", "sweep.md"]


__all__ = ["write_sweep_text"]
