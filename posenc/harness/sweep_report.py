"""At the end of a sweep: ``results.csv`` and ``table.md`` in the sweep directory, the table printed
(and logged to W&B with logger=wandb), then one summary line; the sweep's exit status is non-zero
when any cell failed, was interrupted or never reported. The tables are written whatever happened
to the cells."""

import sys
from pathlib import Path

from hydra.experimental.callback import Callback

from posenc.cells.sweep import SweepError
from posenc.harness.outcome import SWEEP_EXIT, summarize
from posenc.harness.signals import STOP
from posenc.harness.wandb_run import log_sweep_table
from posenc.report.table import write_sweep_tables


class SweepReport(Callback):
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.exists():
            return
        try:
            print(write_sweep_tables(sweep_dir), flush=True)
            log_sweep_table(config, sweep_dir)  # logger=wandb: the table in the sweep's W&B group
        except SweepError as err:  # e.g. no cell reported at all: the summary line says so
            print(f"posenc-run: no table: {err}", file=sys.stderr, flush=True)
        line, status = summarize(sweep_dir, interrupted_by=STOP.exit_status())
        print(line, flush=True)
        SWEEP_EXIT["status"] = status
