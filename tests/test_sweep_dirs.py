"""Where a sweep lands without ``hydra.sweep.dir``: named from what defines it, so the same sweep typed
again finds its cells; another data set or model never shares a preset's directory; a path never
nests folders in a sweep's or a cell's name (posenc/cells/naming.py); a swept key that names no cell is
refused."""

import pytest
from omegaconf import OmegaConf

from posenc.cells.keys import NOT_NAMING, not_naming_a_sweep
from posenc.cells.naming import MAX_NAME, sweep_dir, sweep_name
from posenc.cells.plan import planned_cells
from posenc.harness.sweep.swept import NAMED_BY_THEIR_OWN, unnamed_sweep_problem
from project import compose_cfg, posenc_run, summary_line


def test_a_sweep_is_named_from_the_overrides_that_change_results():
    unnamed = not_naming_a_sweep()
    assert sweep_name(["placement=both", "budget=smoke"], unnamed) == "budget=smoke,placement=both"
    # swept keys name the cells, not the sweep: a placement or seed added later keeps the directory
    assert sweep_name(["placement=both,none", "budget=smoke"], unnamed) == "budget=smoke"
    assert sweep_dir("results/table4", ["experiment=table4", "seed=1,2,3,4"], unnamed) == "results/table4"
    # the order typed, a + and the keys that never change a result do not make another sweep
    assert sweep_name(["budget=smoke", "placement=both,none", "redo=true", "progress=false",
                       "logger=wandb", "logger.group=mine", "runtime.threads=2", "+experiment=table4"], unnamed) \
        == sweep_name(["placement=both,none", "+budget=smoke"], unnamed)
    assert sweep_dir("results/table4", ["experiment=table4"], unnamed) == "results/table4"
    assert sweep_dir("results/table4", ["experiment=table4", "data=wmt14_en_de"], unnamed) == \
        "results/table4+data=wmt14_en_de"


def test_a_path_never_nests_folders_and_a_long_name_is_cut_with_a_hash():
    unnamed = not_naming_a_sweep()
    name = sweep_name(["data=binarized", "data.dir=/data/wmt14/bin"], unnamed)
    assert "/" not in name and name == "data.dir=_data_wmt14_bin,data=binarized"
    many = [f"+model.args.flag_{i}={i}" for i in range(40)]
    long_name = sweep_name(many, unnamed)
    assert len(long_name) == MAX_NAME and long_name != sweep_name(many[:-1], unnamed)


@pytest.mark.usefixtures("without_fairseq_config_store")  # the config is composed here
def test_presets_keep_their_directory_and_other_data_or_models_go_beside_it():
    assert compose_cfg("experiment=table4").hydra.sweep.dir == "results/table4"
    assert compose_cfg("experiment=table4", "redo=true", "logger=wandb").hydra.sweep.dir == "results/table4"
    wmt = compose_cfg("experiment=table4", "data=wmt14_en_de", "model=fconv_table4").hydra.sweep.dir
    assert wmt == "results/table4+data=wmt14_en_de,model=fconv_table4"
    assert compose_cfg("experiment=table4_transformer", "model=transformer_iwslt_de_en").hydra.sweep.dir == \
        "results/sweeps/table4_transformer+model=transformer_iwslt_de_en"
    assert compose_cfg("experiment=table4", "data=wmt14_en_de", "hydra.sweep.dir=mine").hydra.sweep.dir == "mine"


@pytest.mark.slow
def test_the_same_ad_hoc_sweep_typed_twice_resumes(tmp_path):
    """``posenc-run -m placement=both,none budget=smoke`` twice, with a path-valued override: one
    directory, cells that are single folders and planned as such, and a second run that trains nothing."""
    args = ("-m", "placement=both,none", "budget=smoke", "+optim.args.tensorboard_logdir=tb/x")
    first = posenc_run(*args, cwd=tmp_path, cache=tmp_path / "cache")
    assert first.returncode == 0, first.stderr[-3000:]
    sweeps = list((tmp_path / "results" / "sweeps").iterdir())
    assert [s.name for s in sweeps] == ["single+budget=smoke,optim.args.tensorboard_logdir=tb_x"]
    cells = sorted(p.parent.name for p in sweeps[0].glob("*/result.json"))
    assert cells == [f"+optim.args.tensorboard_logdir=tb_x,budget=smoke,placement={p}" for p in ("both", "none")]
    assert sorted(c.dirname for c in planned_cells(sweeps[0])) == cells  # the plan names them as Hydra did
    logs = {p: p.stat().st_mtime_ns for p in sweeps[0].glob("*/train.log")}
    again = posenc_run("-m", "budget=smoke", "+optim.args.tensorboard_logdir=tb/x", "placement=both,none",  # reordered
                       cwd=tmp_path, cache=tmp_path / "cache")
    assert again.returncode == 0, again.stderr[-3000:]
    assert list((tmp_path / "results" / "sweeps").iterdir()) == sweeps
    assert again.stderr.count("finished earlier") == 2 and "training posenc" not in again.stderr
    assert {p: p.stat().st_mtime_ns for p in sweeps[0].glob("*/train.log")} == logs
    assert summary_line(again.stdout) == "2 cells: 2 ok"
    more = posenc_run("-m", "budget=smoke", "+optim.args.tensorboard_logdir=tb/x", "placement=both,none,source",
                      cwd=tmp_path, cache=tmp_path / "cache")  # a placement added: the same sweep, one new cell
    assert more.returncode == 0, more.stderr[-3000:]
    assert list((tmp_path / "results" / "sweeps").iterdir()) == sweeps
    assert more.stderr.count("finished earlier") == 2 and more.stderr.count("training posenc") == 1


@pytest.mark.parametrize("key", sorted(set(NOT_NAMING) - NAMED_BY_THEIR_OWN))
def test_a_swept_key_that_names_no_cell_is_refused_and_a_swept_key_that_does_is_not(key):
    """Every key of ``NOT_NAMING`` but the preset (whose own swept keys name its cells) would put the cells
    of its values in one directory; swept in ``hydra.sweeper.params`` as on the command line."""
    typed = OmegaConf.create({"hydra": {"overrides": {"task": [f"{key}=a,b", "placement=both,none"]}}})
    assert unnamed_sweep_problem(typed).startswith(f"{key}=a,b is swept, but {key} never names a cell's directory")
    preset = OmegaConf.create({"hydra": {"overrides": {"task": ["seed=1,2"]}, "sweeper": {"params": {key: "a,b"}}}})
    assert unnamed_sweep_problem(preset).startswith(f"{key}=a,b is swept")
    fine = OmegaConf.create({"hydra": {"overrides": {"task": [f"{key}=a", "placement=both,none", "experiment=x,y"]}}})
    assert unnamed_sweep_problem(fine) == ""
