"""Figures of a report (matplotlib, Agg, PNG): Δ against the baseline with the verdict's 95% CI and
the paper's own Δ where a paper made the same comparison; BLEU per row with its 95% interval over
seeds; BLEU by source-length bucket, one line per placement (or per value of the baseline key).
The * of both come from the verdict."""

import math
from pathlib import Path

# Figure objects on the Agg canvas, not pyplot: no window, and no change to the backend of
# whoever imports this (a notebook calling the report keeps its own).
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from posenc.atomic import atomic_file
from posenc.report.render import PLACEMENT_LABEL, decided
from posenc.report.rows import order_key

DELTA_FIGURE = "delta.png"
BLEU_FIGURE = "bleu.png"
LENGTH_FIGURE = "bleu_by_length.png"


def panels(reports):
    """``(title, rows)`` per sweep and configuration other than the baseline key, rows in table order."""
    out = []
    for report in reports:
        key = report.settings.baseline[0]
        groups = {}
        for row in report.rows:
            rest = tuple(v for k, v in row.identity.items() if k != key)
            groups.setdefault(rest, []).append(row)
        for rest, rows in groups.items():
            rows.sort(key=lambda r: order_key(key, r.identity.get(key)))
            out.append((f"{report.sweep.label}: " + " ".join(v for v in rest if v), rows, report, key))
    return out


def _grid(n):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(5.2 * cols, 3.8 * rows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _label(key, value):
    return PLACEMENT_LABEL.get(value, value) if key == "placement" else f"{key}={value}"


def _stars(ax, xs, ys, rows):
    for x, y, r in zip(xs, ys, rows):
        if decided(r):
            ax.annotate("*", (x, y), textcoords="offset points", xytext=(6, 4))


def delta_figure(reports):
    """Per panel: each row's Δ BLEU against its baseline with the verdict's 95% CI (over seeds and
    test sentences; a sequential row's repeated CI at its row's level, as the legend says), and the
    paper's own Δ for the same comparison where there is one. A panel whose only row is its baseline
    (placement=none in a sweep of kinds, where the kind is the baseline key) compares nothing and is
    left out; None where no panel compares anything."""
    found = [(title, compared, report, key) for title, rows, report, key in panels(reports)
             if (compared := [r for r in rows if r.comparisons["test"].p_note != "baseline"])]
    if not found:
        return None
    fig, axes = _grid(len(found))
    for ax, (title, rows, report, key) in zip(axes, found):
        xs = list(range(len(rows)))
        deltas = [math.nan if (d := r.comparisons["test"].delta_bleu) is None else d for r in rows]
        cis = [(r.verdicts[("bleu", "test")].delta_ci_low, r.verdicts[("bleu", "test")].delta_ci_high) for r in rows]
        ax.errorbar(xs, deltas, yerr=_yerr(deltas, cis), fmt="o", capsize=4,
                    label="ours: Δ, verdict's CI (95%; a sequential row's: repeated, at its row's level)")
        _stars(ax, xs, deltas, rows)
        paper = [(x, r.paper.delta, r.paper.source) for x, r in zip(xs, rows) if r.paper.delta is not None]
        if paper:
            ax.scatter([p[0] + 0.15 for p in paper], [p[1] for p in paper], marker="x", color="tab:red", zorder=3,
                       label=f"paper's Δ ({paper[0][2]}, its own test set)")
        ax.axhline(0, color="grey", linewidth=0.8)
        _dress(ax, xs, rows, key, "Δ BLEU against the baseline",
               f"{title}\nΔ against {'='.join(report.settings.baseline)}; * verdict better/worse (Holm)")
    fig.tight_layout()
    return fig


def _dress(ax, xs, rows, key, ylabel: str, title: str) -> None:
    """A panel's row labels, axis label, title, grid and legend, alike in every figure."""
    ax.set_xticks(list(xs), [_label(key, r.identity.get(key)) for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def _yerr(centres, intervals) -> list:
    """Matplotlib's ``yerr`` (distances below and above each centre) from each row's interval,
    ``(low, high)``; 0 where a row has no interval (None). A one-seed row's bootstrap interval can
    lie wholly on one side of its own mean (BLEU near 0: most resamples score above it); its bar
    then stops at the mean on that side (matplotlib refuses negative lengths; the table gives the
    interval itself)."""
    def distance(centre, value, sign):
        return 0 if value is None or math.isnan(centre) else max(0.0, sign * (value - centre))
    return [[distance(c, low, -1) for c, (low, _) in zip(centres, intervals)],
            [distance(c, high, 1) for c, (_, high) in zip(centres, intervals)]]


def bleu_figure(reports):
    found = panels(reports)
    fig, axes = _grid(len(found))
    for ax, (title, rows, report, key) in zip(axes, found):
        xs = range(len(rows))
        means = [math.nan if (m := r.scores.split("test").bleu.mean) is None else m for r in rows]
        cis = [(r.scores.bleu_ci.low, r.scores.bleu_ci.high) for r in rows]
        ax.errorbar(xs, means, yerr=_yerr(means, cis), fmt="o", capsize=4, label="mean, 95% CI over seeds")
        _stars(ax, xs, means, rows)
        _dress(ax, xs, rows, key, "BLEU (sacreBLEU)",
               f"{title}\n* verdict better/worse against {'='.join(report.settings.baseline)}")
    fig.tight_layout()
    return fig


def length_figure(reports):
    found = panels(reports)
    fig, axes = _grid(len(found))
    for ax, (title, rows, report, key) in zip(axes, found):
        labels = list(report.bucket_labels) + (["long split"] if report.has_long else [])
        for r in rows:
            ys = [r.by_length.bleu.get(b) for b in report.bucket_labels]
            if report.has_long:
                ys.append(r.scores.split("test_long").bleu.mean)
            ax.plot(range(len(labels)), [math.nan if y is None else y for y in ys], marker="o",
                    label=_label(key, r.identity.get(key)))
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("source length (words)")
        ax.set_ylabel("BLEU (mean over seeds)")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_figures(reports, out_dir: Path) -> list:
    """Write the figures into ``out_dir``; return their paths (none when no row has a score; no Δ
    figure when no row is compared, and an earlier one is removed, not left beside the new ones)."""
    if not any(r.scores.split("test").bleu.mean is not None for report in reports for r in report.rows):
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in ((DELTA_FIGURE, delta_figure), (BLEU_FIGURE, bleu_figure), (LENGTH_FIGURE, length_figure)):
        fig = draw(reports)
        if fig is None:
            (out_dir / name).unlink(missing_ok=True)
            continue
        with atomic_file(out_dir / name) as handle:  # a reader never sees half a PNG
            fig.savefig(handle, format="png", dpi=110)
        written.append(out_dir / name)
    return written
