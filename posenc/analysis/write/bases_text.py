"""``bases.csv`` and ``bases.md``: one row per base of ``posenc-pe bases``, written atomically."""

import os

from posenc.analysis.write.format import csv_text, figure_list, fmt, md_table
from posenc.atomic import write_text_atomic

# (report key, column header), in the order of the table; a column no row has is left out
COLUMNS = (
    ("base", "base"),
    ("wavelength_min", "shortest wavelength"),
    ("wavelength_max", "longest wavelength"),
    ("pairs_longer_than_table", "pairs with wavelength > N"),
    ("monotone_up_to", "f(m) falls up to offset"),
    ("monotonicity", "monotonicity (all offsets)"),
    ("monotonicity_local16", "monotonicity (offsets <= 16)"),
    ("absolute_position_mae", "probe: absolute position MAE"),
    ("relative_order_error", "probe: relative order error"),
    ("relative_error_float32", "3.1 max error, float32"),
    ("relative_error_worst_k", "3.1 worst offset k"),
)


def write_bases_text(report: dict, out_dir: str) -> list:
    """After the figures: ``bases.md`` links ``report["figures"]``."""
    rows = report["rows"]
    d, n, v = report["dim"], report["max_len"], report["variant"]
    write_text_atomic(os.path.join(out_dir, "bases.csv"),
                      csv_text(rows, [k for k, _ in COLUMNS if any(k in r for r in rows)]))
    columns = [(label, (lambda r, k=key: fmt(r[k]))) for key, label in COLUMNS if any(key in r for r in rows)]
    lines = [f"# What the base of the sinusoid changes, d={d}, N={n}, `{v}` layout", "",
             f"Rows PE(0)..PE({n - 1}) for each base b (wavelengths 2*pi .. ~2*pi*b). Every base gives the norm "
             f"sqrt(d/2) = {fmt(report['norm'])} at every position and exact translation invariance of the dot "
             f"product; what changes is below.", ""]
    lines += md_table(rows, columns)
    lines += ["", "Columns. *Pairs with wavelength > N*: sin/cos pairs that never complete a period inside the table. "
              "*f(m) falls up to offset*: the largest M with f(0) > f(1) > ... > f(M) for the dot-product proximity "
              "f(m) = <PE_x, PE_x+m> = sum_i cos(m w_i) (the same at every x). *Monotonicity*: mean over anchors of "
              "-Spearman(offset, proximity), 1 = falls everywhere. *Probes*: ridge regression to the position (MAE in "
              "positions) and logistic regression for the order of two positions, 5-fold over held-out positions "
              "(Wang & Chen, EMNLP 2020). *3.1 max error*: max |PE(p+k) - M(k) PE(p)| over all p + k < N "
              "with a float32 table (float32 rotations too), and the offset k where it occurs.", "",
              figure_list(report["figures"])]
    write_text_atomic(os.path.join(out_dir, "bases.md"), "\n".join(lines) + "\n")
    return ["bases.csv", "bases.md"]


__all__ = ["COLUMNS", "write_bases_text"]
