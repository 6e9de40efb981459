"""How the reports spell their numbers and tables: one number (``fmt``), a Markdown row of
records side by side, a Markdown table, a CSV text and the list of figure links."""

import csv
import io
import math
import os


def fmt(x, digits=4):
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return "n/a"
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
            return f"{x:.2e}"
        return f"{x:.{digits}g}"
    return str(x)


def compare_row(label, get, records: dict, names) -> str:
    """A Markdown row: ``get`` of each named record side by side, "n/a" where one has no such value."""
    vals = []
    for name in names:
        try:
            vals.append(fmt(get(records[name])))
        except (KeyError, TypeError):
            vals.append("n/a")
    return f"| {label} | " + " | ".join(vals) + " |"


def md_table(rows, columns) -> list:
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


def csv_text(rows, columns) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return out.getvalue()


def figure_list(figures) -> str:
    return "\n".join(f"![{os.path.splitext(f)[0]}]({f})" for f in figures)


__all__ = ["compare_row", "csv_text", "figure_list", "fmt", "md_table"]
