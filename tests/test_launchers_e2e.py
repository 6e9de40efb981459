"""The Table 4 smoke sweep through the parallel launchers with W&B offline: the cells the plan names
(the basic launcher's cells), all ok, one offline W&B run per cell with its placement and BLEU, and
the sweep's table run. A 4-cell slice (placements both and none, seeds 1 and 2) keeps it short; the
docs (docs/clusters.md) show the 12-cell command."""

import json
import sys
from pathlib import Path

import pytest

import project
from posenc.cells.plan import planned_cells
from posenc.harness.launch.parallel import thread_share
from wandb_offline import offline_runs

BIN = Path(sys.executable).parent
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=20"]
SLICE = ["placement=both,none", "seed=1,2"]
SECRET = "posenc" + "7" * 34  # a stand-in W&B key (40 characters): it must never reach our files

pytestmark = pytest.mark.slow


def posenc_run(*args, cwd, cache):
    return project.posenc_run(*args, cwd=cwd, cache=cache, timeout=1800,
                              env={"HOME": str(cwd), "WANDB_MODE": "offline", "WANDB_API_KEY": SECRET,
                                   "WANDB_SILENT": "true",
                                   "OMP_NUM_THREADS": None})  # the launchers' own share of the cores, tested below


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("launchers")
    return root, root / "cache"


LAUNCHERS = {
    "joblib": (["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], 2),
    "submitit_local": (["hydra/launcher=submitit_local"], 4),  # every cell of the array at once
}


@pytest.fixture(scope="module", params=list(LAUNCHERS))
def sweep(request, workspace):
    root, cache = workspace
    launcher, concurrent = LAUNCHERS[request.param]
    sweep_dir = root / request.param
    proc = posenc_run("-m", "experiment=table4", "budget=smoke", *SLICE, *SMALL_DATA, "logger=wandb", *launcher,
                      f"hydra.sweep.dir={sweep_dir}", cwd=root, cache=cache)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return request.param, sweep_dir, concurrent, proc


def cell_records(sweep_dir):
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/result.json")}


def test_the_planned_cells_all_finish_ok(sweep):
    _, sweep_dir, _, _ = sweep
    planned = [c.dirname for c in planned_cells(sweep_dir)]
    # The basic launcher's cells: named from their own overrides (logger=wandb does not name a cell).
    assert sorted(planned) == sorted(",".join(sorted(["budget=smoke", *SMALL_DATA, f"placement={p}", f"seed={s}"]))
                                     for p in ("both", "none") for s in (1, 2))
    records = cell_records(sweep_dir)
    assert sorted(records) == sorted(planned)
    assert {name: r["status"] for name, r in records.items()} == {name: "ok" for name in planned}
    assert (sweep_dir / "table.md").exists() and (sweep_dir / "results.csv").exists()


def test_one_offline_wandb_run_per_cell_with_placement_and_bleu(sweep):
    _, sweep_dir, _, _ = sweep
    records = cell_records(sweep_dir)
    runs = offline_runs(sweep_dir / "wandb")
    cells = {run.name: run for run in runs.values() if run.job_type == "cell"}
    assert sorted(cells) == sorted(records) and len(cells) == len([r for r in runs.values() if r.job_type == "cell"])
    groups = {run.group for run in runs.values()}
    assert len(groups) == 1 and next(iter(groups)).startswith(f"table4:{sweep_dir.name}:")  # its name, not its path
    for name, run in cells.items():
        record = records[name]
        assert run.config["placement"] == record["placement"] and f"placement={record['placement']}" in name
        assert (run.config["encoder_pos"], run.config["decoder_pos"]) == (record["encoder_pos"], record["decoder_pos"])
        assert run.summary["bleu"] == record["bleu"] and run.summary["status"] == "ok"
        assert run.values("valid/ppl")[-1] == (record["num_updates"], pytest.approx(record["valid_ppl"], abs=0.01))
        assert run.exit_codes == [0]


def test_the_sweeps_table_run(sweep):
    _, sweep_dir, _, _ = sweep
    tables = [run for run in offline_runs(sweep_dir / "wandb").values() if run.job_type == "table"]
    assert len(tables) == 1
    (_, logged), = [(s, v) for s, v in tables[0].history if "results.path" in v]
    table = json.loads(next((sweep_dir / "wandb").glob(f"offline-run-*/files/{logged['results.path']}")).read_text())
    placements = [dict(zip(table["columns"], row))["placement"] for row in table["data"]]
    assert placements == ["both", "none"] and tables[0].summary["cells_ok"] == 4


def test_cells_side_by_side_share_the_cores(sweep):
    name, sweep_dir, concurrent, _ = sweep
    if name == "joblib":
        import joblib
        expected = str(max(1, joblib.cpu_count() // concurrent))  # the share joblib gives its workers
    else:
        expected = str(thread_share(concurrent))
    for script in sweep_dir.glob("*/commands.sh"):
        lines = script.read_text().splitlines()
        assert "export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in lines and \
            f"export OMP_NUM_THREADS={expected}" in lines, lines


def test_no_credential_reaches_any_file(sweep):
    _, sweep_dir, _, proc = sweep
    assert SECRET not in proc.stdout + proc.stderr
    for path in sweep_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_rerun_keeps_every_cell_and_its_run(sweep, workspace):
    name, sweep_dir, _, _ = sweep
    if name != "joblib":
        pytest.skip("one rerun is enough")
    root, cache = workspace
    before = {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/result.json")}
    runs_before = len(list((sweep_dir / "wandb").glob("offline-run-*")))
    proc = posenc_run("-m", "experiment=table4", "budget=smoke", *SLICE, *SMALL_DATA, "logger=wandb",
                      *LAUNCHERS[name][0], f"hydra.sweep.dir={sweep_dir}", cwd=root, cache=cache)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.count("finished earlier") == 4
    assert {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/result.json")} == before
    # No cell run again; only the table run is logged once more (its table, refreshed).
    assert len(list((sweep_dir / "wandb").glob("offline-run-*"))) == runs_before + 1


def test_a_bf16_cell_trains_and_scores_through_the_bf16_entry(workspace):
    """bf16 on the CPU: slow, but the same entry and flags as on a GPU, end to end."""
    root, cache = workspace
    proc = posenc_run("budget=smoke", "precision=bf16", *SMALL_DATA, f"hydra.run.dir={root / 'bf16'}", cwd=root,
                      cache=cache)
    assert proc.returncode == 0, proc.stderr[-4000:]
    record = json.loads((root / "bf16" / "result.json").read_text())
    assert record["status"] == "ok" and record["test_sentences"] == 37 and record["valid_ppl"] > 1
    train_line, = [ln for ln in (root / "bf16" / "commands.sh").read_text().splitlines() if "--bf16" in ln]
    assert f"{sys.executable} -m posenc.trainer.train " in train_line and " --bf16" in train_line
    log = (root / "bf16" / "train.log").read_text()
    assert "'bf16': True" in log and "'tpu': False" in log  # fairseq's own config dump
