"""At the end of a sweep: ``results.csv`` and ``table.md`` in the sweep directory, and the table printed."""

from pathlib import Path

from hydra.experimental.callback import Callback

from posenc.harness.wandb_run import log_sweep_table
from posenc.report.table import write_sweep_tables


class SweepReport(Callback):
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if sweep_dir.exists():
            print(write_sweep_tables(sweep_dir), flush=True)
            log_sweep_table(config, sweep_dir)  # logger=wandb: the table in the sweep's W&B group
