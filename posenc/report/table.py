"""The report of one or more sweeps: records in, tables (and figures) out. The harness builds
``sweep_end_report`` once when a sweep ends and writes it with ``write_sweep_files``; ``posenc-table``
calls ``report_text``."""

import csv
import io
from dataclasses import replace
from pathlib import Path

from posenc.atomic import write_text_atomic
from posenc.cells.record import FIELDS
from posenc.cells.sweep import Sweep, read_sweep
from posenc.report.render import render_reports
from posenc.report.rows import Settings, as_dicts, build_report, check_baseline, parse_baseline
from posenc.report.testsets import TestSets


def build_reports(sweep_dirs, settings: Settings = Settings(), check: bool = False,
                  strategy_baseline: bool = False) -> list:
    """One report per sweep directory; ``check``: refuse a baseline no sweep has (a user's choice);
    ``strategy_baseline``: an adaptive sweep is compared with the baseline its strategy ran with."""
    return reports_of([read_sweep(d) for d in sweep_dirs], settings, check, strategy_baseline)


def own_baseline(sweep: Sweep, settings: Settings) -> Settings:
    """The settings with the baseline the sweep's strategy (seeds or tune) decided against, where it has one."""
    base = sweep.strategy.settings.baseline if sweep.strategy else None
    return replace(settings, baseline=parse_baseline(str(base))) if base else settings


def reports_of(sweeps, settings: Settings = Settings(), check: bool = False, strategy_baseline: bool = False) -> list:
    """One report per sweep already read (``posenc.cells.sweep.Sweep``); SweepError for one with no cells."""
    sweeps = [s.require_cells() for s in sweeps]
    if check:
        check_baseline(sweeps, settings.baseline)
    # Shared: sweeps on the same corpus read its test set once. A sweep made before records named
    # their cache entry is found in a `.posenc_cache` beside it or above it (the default cache
    # sits in the directory posenc-run ran from, e.g. results/table4/../../.posenc_cache).
    roots = [parent / ".posenc_cache" for s in sweeps for parent in Path(s.dir).resolve().parents]
    testsets = TestSets(cache_roots=dict.fromkeys(roots))
    return [build_report(s, own_baseline(s, settings) if strategy_baseline else settings, testsets) for s in sweeps]


def report_text(sweep_dirs, settings: Settings = Settings(), fmt: str = "md") -> str:
    return render_reports(build_reports(sweep_dirs, settings), fmt)


def table_rows(sweep_dir, settings: Settings = Settings()) -> list:
    """The rows of a sweep's table as plain dicts (one per configuration, every column): what a
    W&B table or any other consumer takes."""
    return as_dicts(build_reports([sweep_dir], settings)[0])


def results_csv(sweep: Sweep) -> str:
    """One line per cell that reported: the contract's fields first, then any other its file has."""
    records = [record.as_read() for record in sweep.records]
    extras = sorted({k for r in records for k in r if k not in FIELDS and not k.startswith("_")
                     and not isinstance(r[k], (dict, list))})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(FIELDS) + extras, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: ("" if rec.get(k) is None else rec.get(k)) for k in list(FIELDS) + extras})
    return out.getvalue()


# The sweep-end table.md ends with the power section (posenc-table shows it with --power).
SWEEP_END = Settings(power=True)


def sweep_end_report(sweep: Sweep, settings: Settings = SWEEP_END):
    """The report a sweep's end writes, of the sweep as read once (SweepError when no cell reported)."""
    return reports_of([sweep], settings)[0]


def write_sweep_files(report, figures: bool = True) -> tuple:
    """Write ``results.csv``, ``table.md`` and (by default) the figures of ``report`` (one sweep's)
    into its sweep directory; return the table and the figures' paths."""
    sweep_dir = Path(report.sweep.dir)
    table = render_reports([report], "md")
    write_text_atomic(sweep_dir / "results.csv", results_csv(report.sweep))
    write_text_atomic(sweep_dir / "table.md", table)
    written = []
    if figures:
        from posenc.report.figures import write_figures  # matplotlib only when figures are drawn
        written = write_figures([report], sweep_dir)
    return table, written


def full_table_line(sweep_dir) -> str:
    """The last line of a sweep's output: where every table and note of it is."""
    return f"Every table and note: {Path(sweep_dir) / 'table.md'}"
