"""At the end of a sweep: the sweep read once into one report, from which come ``results.csv``,
``table.md`` and the figures in the sweep directory (and the table logged to W&B with logger=wandb,
power columns included). The answer comes last, where a terminal leaves it in view: the figures'
paths, one summary line, the compact table (at most 100 columns, ``posenc.report.compact``) and the
path of ``table.md``, which keeps every table and note. The sweep's exit status is non-zero when any
cell failed, was interrupted or never reported. The tables are written whatever happened to the cells."""

import sys
from pathlib import Path

from hydra.experimental.callback import Callback

from posenc.cells.sweep import SweepError, read_sweep
from posenc.harness.run.signals import STOP
from posenc.harness.sweep.planner import report_settings as seeds_report_settings
from posenc.harness.sweep.summary import summarize
from posenc.harness.tracking.wandb_run import log_sweep_table
from posenc.report.compact import compact_table
from posenc.report.table import SWEEP_END, full_table_line, own_baseline, sweep_end_report, write_sweep_files


def report_settings(sweep):
    """The sweep-end table's settings: as its seeds strategy looked, where one sized the seeds (a
    seeds strategy's sweep, or a tune strategy's with seeds_strategy); else the defaults with the
    strategy's baseline (``own_baseline``, as posenc-table takes it)."""
    seeds = sweep.strategy.seeds_settings() if sweep.strategy else None
    return seeds_report_settings(seeds) if seeds else own_baseline(sweep, SWEEP_END)


class SweepReport(Callback):
    """Hydra's callback at a sweep's end. Hydra gives a callback no way to return a value, so the
    sweep's exit status waits in ``SweepReport.exit_status`` for posenc-run's ``main`` (one
    posenc-run process runs one sweep)."""
    exit_status = 0

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.exists():
            return
        sweep = read_sweep(sweep_dir)
        answer = []
        try:
            # An adaptive sweep's table plans as its strategy planned; any other's with the defaults.
            report = sweep_end_report(sweep, report_settings(sweep))
            _, figures = write_sweep_files(report)
            print("".join(f"figure: {path}\n" for path in figures), end="", flush=True)
            log_sweep_table(config, report)  # logger=wandb: the same table in the sweep's W&B group
            answer = ["", compact_table(report) + full_table_line(sweep_dir)]
        except SweepError as err:  # e.g. no cell reported at all: the summary line says so
            print(f"posenc-run: no table: {err}", file=sys.stderr, flush=True)
        line, status = summarize(sweep, interrupted_by=STOP.exit_status())
        print("\n".join([line, *answer]), flush=True)
        SweepReport.exit_status = status

