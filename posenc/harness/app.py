"""``posenc-run``: the Hydra application. One job is one cell; ``-m`` runs a sweep of cells."""

import statistics
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from posenc.corpora import CorpusError
from posenc.harness.cell import run_cell
from posenc.harness.parallel import cell_resources
from posenc.harness.progress import CellProgress
from posenc.harness.records import read_result
from posenc.harness.spec import ConfigError, check_values
from posenc.kinds import grid_skip_reason
from posenc.report.plan import planned_cells


def cell_label(cfg, hydra_cfg, plan) -> str:
    where = f"placement={cfg.placement} pe={cfg.pe} seed={cfg.seed} model={cfg.model.name}"
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return where
    return f"cell {hydra_cfg.job.num + 1}/{len(plan) or '?'} {where}"


def sweep_eta(sweep_dir: Path, cells_left: int):
    """Minutes the rest of the sweep should take, from the cells already finished in it."""
    durations = [r["cell_wall_s"] for r in (read_result(p.parent) for p in sweep_dir.glob("*/result.json"))
                 if r and r.get("status") == "ok" and r.get("cell_wall_s")]
    return statistics.fmean(durations) * cells_left / 60 if durations else None


# conf/ sits at the repo root (an editable install); an absolute path works from any directory.
CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg) -> None:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    plan = (planned_cells(Path(hydra_cfg.sweep.dir)) or []) if multirun else []
    progress = CellProgress(cell_label(cfg, hydra_cfg, plan), int(cfg.budget.max_epoch), float(cfg.budget.max_time_min),
                            enabled=bool(cfg.progress))
    if multirun and plan:
        eta = sweep_eta(Path(hydra_cfg.sweep.dir), len(plan) - hydra_cfg.job.num)
        if eta is not None:
            progress.say(f"sweep: {len(plan) - hydra_cfg.job.num} cells to go, about {eta:.1f} min at the pace so far")
    try:
        if cfg.skip_impossible:
            check_values(cfg)  # a misspelt value is an error, not a cell to skip
            reason = grid_skip_reason(cfg.model.family, cfg.pe, cfg.placement)
            if reason:
                progress.say(f"skipped by design: {reason}")
                return
        # Cells side by side (joblib, submitit_local) share the cores and get GPUs of their own.
        home = Path(hydra_cfg.sweep.dir) if multirun else Path(hydra_cfg.runtime.output_dir)
        with cell_resources(cfg, hydra_cfg.launcher, len(plan), home, say=progress.say) as child_env:
            record = run_cell(cfg, Path(hydra_cfg.runtime.output_dir), progress, child_env)
    except (ConfigError, CorpusError) as err:
        # Refused before any training; one line, no traceback, and a sweep stops here too.
        print(f"posenc-run: error: {err}", file=sys.stderr)
        sys.exit(2)
    if record["status"] != "ok" and hydra_cfg.mode != RunMode.MULTIRUN:
        sys.exit(1)  # a sweep goes on to the next cell; the table shows this one as failed


if __name__ == "__main__":
    main()
