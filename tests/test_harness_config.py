"""The Hydra config tree: every group composes, bad values are refused with the allowed ones."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from posenc.harness.config.commands import flags, train_command
from posenc.harness.config.limits import RunLength, run_length
from posenc.harness.config.resolve import resolve_cell
from posenc.harness.config.spec import cell_spec, check_possible
from posenc.harness.errors import ConfigError
from posenc.kinds import grid_skip_reason
from project import CONF, cell_of, compose_cell, compose_cfg

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")


def test_posenc_run_does_not_import_fairseq():
    code = "import sys, posenc.harness.app; assert 'fairseq' not in sys.modules; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_the_sweepers_settings_take_their_default_baseline_from_the_cells_room():
    """The sweepers' structured configs need the default baseline, not the report that uses it."""
    code = ("import posenc.harness.sweep.config as c, posenc.report.rows as r; "
            "print(c.BASELINE == '='.join(r.Settings().baseline))")
    first = "import sys, posenc.harness.sweep.config; print(any(m.startswith('posenc.report') for m in sys.modules))"
    alone = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, timeout=120)
    assert alone.stdout.strip() == "False", alone.stderr[-2000:]
    same = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert same.stdout.strip() == "True", same.stderr[-2000:]


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_contract_options_exist():
    assert {"fconv_small", "fconv_iwslt_de_en", "fconv_wmt_en_de", "fconv_table4", "transformer_small",
            "transformer_iwslt_de_en", "transformer_base"} <= set(options("model"))
    assert {"synthetic", "multi30k_de_en", "iwslt14_de_en", "wmt14_en_de", "wmt16_en_ro",
            "custom", "binarized"} <= set(options("data"))
    assert {"smoke", "cpu", "paper"} <= set(options("budget"))
    assert {"table4", "table4_transformer", "pe_grid"} <= set(options("experiment"))
    assert {"none", "wandb"} <= set(options("logger"))


def test_defaults():
    cfg = compose_cfg()
    assert (cfg.model.name, cfg.data.name, cfg.budget.name, cfg.logger.name) == \
        ("fconv_small", "synthetic", "cpu", "none")
    assert (cfg.placement, cfg.pe, cfg.seed) == ("both", "learned", 1)
    raw = OmegaConf.load(CONF / "config.yaml")
    assert OmegaConf.to_container(raw)["hydra"]["sweep"]["subdir"] == "${posenc_cell:${hydra.job.override_dirname}}"


@pytest.mark.parametrize("model", options("model"))
def test_every_model_composes_and_names_a_registered_architecture(model):
    cfg = compose_cfg(f"model={model}")
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posenc.fairseq_plugin  # noqa: F401
    assert cfg.model.name == model
    assert cfg.model.arch in ARCH_MODEL_REGISTRY
    family = "fconv" if ARCH_MODEL_REGISTRY[cfg.model.arch].__name__ == "PosencFConvModel" else "transformer"
    assert cfg.model.family == family


@pytest.mark.parametrize("data", options("data"))
def test_every_data_config_composes(data):
    cfg = compose_cfg(f"data={data}")
    assert cfg.data.name == data


# What a budget may set: how long a run is and how it is cut (batches, checkpoints), nothing about
# how the model learns.
RUN_LENGTH_KEYS = {"name", "max_epoch", "max_update", "max_time_min", "max_tokens", "step_timeout_min",
                   "save_interval_updates"}


@pytest.mark.parametrize("budget", options("budget"))
def test_every_budget_caps_the_run_and_nothing_else(budget):
    cfg = compose_cfg(f"budget={budget}")
    for key in ("max_epoch", "max_update", "max_time_min"):
        assert cfg.budget[key] >= 0
    assert set(cfg.budget) <= RUN_LENGTH_KEYS, set(cfg.budget) - RUN_LENGTH_KEYS


LENGTH_FLAGS = ("--max-epoch", "--max-update", "--stop-time-hours", "--max-tokens", "--save-interval-updates",
                "--keep-interval-updates")


def without_length(argv):
    """fairseq-train's command line without the flags a budget sets (and their values)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in LENGTH_FLAGS:
            skip = True
        else:
            out.append(arg)
    return out


@pytest.mark.parametrize("model", options("model"))
@pytest.mark.parametrize("budget", ["smoke", "paper"])
def test_a_budget_never_changes_how_the_model_is_trained(model, budget):
    default, other = compose_cell(f"model={model}"), compose_cell(f"model={model}", f"budget={budget}",
                                                               "budget.max_update=100")
    assert other.optim_args == default.optim_args
    argvs = [train_command("bin", "ckpt", c) for c in (default, other)]
    assert without_length(argvs[0]) == without_length(argvs[1])


def test_each_model_config_picks_its_own_optimiser_and_the_command_line_wins():
    assert compose_cfg().optim.name == "fconv_adam"
    assert compose_cfg("model=transformer_small").optim.name == "transformer_adam"
    assert compose_cfg("experiment=table4_transformer").optim.name == "transformer_adam"
    assert compose_cfg("model=fconv_table4").optim.name == "convs2s"
    assert compose_cfg("model=transformer_base").optim.name == "vaswani"
    assert compose_cfg("model=transformer_base", "optim=transformer_adam").optim.name == "transformer_adam"


def test_the_convs2s_schedule_is_the_papers_and_ends_at_its_lr_floor():
    args = compose_cfg("model=fconv_table4").optim.args
    assert (args.optimizer, args.lr, args.momentum, args.clip_norm, args.lr_shrink, args.stop_min_lr,
            args.dropout) == \
        ("nag", 0.25, 0.99, 0.1, 0.1, 0.0001, 0.2)
    assert run_length(compose_cfg("model=fconv_table4", "budget=paper")) == RunLength(0, 0)  # stop_min_lr ends it


def test_the_vaswani_schedule_ends_after_the_papers_100k_updates_unless_a_budget_cuts_it():
    cfg = compose_cfg("paths.cache_dir=/no/cache", "model=transformer_base", "budget=paper")
    args = cfg.optim.args
    assert (args.adam_betas, args.adam_eps, args.warmup_updates) == ("(0.9, 0.98)", 1e-9, 4000)
    argv = train_command("bin", "ckpt", cell_of(resolve_cell(cfg)))
    assert argv[argv.index("--max-update") + 1] == "100000"
    assert run_length(compose_cfg("model=transformer_base", "budget=smoke")) == RunLength(1, 20)


@pytest.mark.parametrize("model", options("model"))
def test_every_run_ends_or_is_refused_in_one_line(model):
    cfg = compose_cfg(f"model={model}", "budget=paper")
    try:
        length = run_length(cfg)
    except ConfigError as err:
        assert "\n" not in str(err) and "nothing ends this run" in str(err) and "budget.max_update" in str(err)
        assert not cfg.optim.max_update and "stop_min_lr" not in cfg.optim.args
        return
    assert length.max_update or float(cfg.optim.args.get("stop_min_lr", 0)) > 0


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = compose_cfg(f"experiment={experiment}")
    assert cfg.experiment_name == experiment
    assert cfg.hydra.sweeper.params


def test_table4_preset():
    cfg = compose_cfg("experiment=table4")
    assert (cfg.model.name, cfg.data.name, cfg.pe) == ("fconv_small", "synthetic", "learned")
    assert cfg.hydra.sweeper.params == {"placement": "both,source,target,none", "seed": "1,2,3"}
    assert cfg.hydra.sweep.dir == "results/table4"
    assert compose_cfg("experiment=table4", "model=fconv_table4").model.name == "fconv_table4"
    assert compose_cfg("experiment=table4_transformer").pe == "sinusoidal"


@pytest.mark.parametrize("placement,expected", [("both", ("learned", "learned")), ("source", ("learned", "none")),
                                                ("target", ("none", "learned")), ("none", ("none", "none"))])
def test_placement_maps_to_the_side_flags(placement, expected):
    cfg = compose_cfg("paths.cache_dir=/no/cache", f"placement={placement}")
    spec, _ = cell_spec(cfg)
    assert (spec.encoder_pos, spec.decoder_pos) == expected
    argv = train_command("bin", "ckpt", cell_of(resolve_cell(cfg)))
    i = argv.index("--encoder-pos")
    assert argv[i:i + 4] == ["--encoder-pos", expected[0], "--decoder-pos", expected[1]]
    assert argv[argv.index("--seed") + 1] == "1"
    assert argv[argv.index("--required-batch-size-multiple") + 1] == "1"


@pytest.mark.parametrize("overrides,message", [
    (["placement=sideways"], "placement='sideways' is not allowed; allowed: both, source, target, none"),
    (["pe=xpos"], "pe='xpos' is not allowed; allowed: learned, sinusoidal, rope, alibi, t5, shaw, shape, cape"),
    *[([f"pe={k}"], f"pe='{k}' is not possible for model=fconv_small (fconv); allowed: learned, sinusoidal, shape, "
       "cape") for k in ("rope", "alibi", "t5", "shaw")],
])
def test_bad_cells_are_refused_with_the_allowed_values(overrides, message):
    cfg = compose_cfg(*overrides)
    with pytest.raises(ConfigError) as err:
        spec, _ = cell_spec(cfg)           # each value on its own
        check_possible(spec, cfg.model.name)  # the kind against the model
    assert str(err.value) == message


@pytest.mark.parametrize("pe", ["alibi", "t5"])
def test_attention_bias_kinds_reach_the_transformer_flags(pe):
    cfg = compose_cfg("paths.cache_dir=/no/cache", "model=transformer_small", f"pe={pe}", "placement=source")
    argv = train_command("bin", "ckpt", cell_of(resolve_cell(cfg)))
    i = argv.index("--encoder-pos")
    assert argv[i:i + 4] == ["--encoder-pos", pe, "--decoder-pos", "none"]


@pytest.mark.parametrize("experiment", ["pe_grid", "extrapolation", "extrapolation_multi30k"])
def test_kind_sweeps_cover_every_kind(experiment):
    from posenc.kinds import BUILTIN_KINDS
    grid = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
    assert grid.pe.split(",") == [k for k in BUILTIN_KINDS if k != "none"]


def test_extrapolation_preset_scores_the_long_split_on_the_transformer():
    cfg = compose_cfg("experiment=extrapolation")
    assert (cfg.model.family, cfg.data.name, cfg.generation.test_long, cfg.skip_impossible) == \
        ("transformer", "synthetic", True, True)
    assert cfg.hydra.sweep.dir == "results/sweeps/extrapolation"
    params = cfg.hydra.sweeper.params
    cells = [(pe, placement, seed) for pe in params.pe.split(",") for placement in params.placement.split(",")
             for seed in str(params.seed).split(",") if grid_skip_reason("transformer", pe, placement) is None]
    assert len(cells) == 8 * 2 * 3 + 3  # each kind on both sides and on the source side, plus none


def test_the_multi30k_extrapolation_preset_splits_multi30k_by_length_on_both_sides():
    from posenc.corpora.config import parse
    from posenc.corpora.length_split import LengthSplit

    cfg = compose_cfg("experiment=extrapolation_multi30k")
    assert (cfg.model.family, cfg.data.name, cfg.generation.test_long, cfg.skip_impossible) == \
        ("transformer", "multi30k_de_en", True, True)
    assert parse(cfg.data).length_split == LengthSplit(16, 1000, "both")
    params = cfg.hydra.sweeper.params
    cells = [(pe, placement) for pe in params.pe.split(",") for placement in params.placement.split(",")
             if grid_skip_reason("transformer", pe, placement) is None]
    assert ("sinusoidal", "both") in cells and ("learned", "none") in cells
    assert len(cells) == len(params.pe.split(",")) + 1  # every kind on both sides, plus none


def test_rope_with_placement_none_needs_no_kind():
    assert cell_spec(compose_cfg("pe=rope", "placement=none"))[0].encoder_pos == "none"


def test_grid_skips():
    assert grid_skip_reason("fconv", "rope", "both")
    assert grid_skip_reason("transformer", "sinusoidal", "none")
    assert grid_skip_reason("transformer", "rope", "source") is None
    assert grid_skip_reason("fconv", "t5", "target") and grid_skip_reason("transformer", "alibi", "both") is None
    assert grid_skip_reason("fconv", "learned", "none") is None


def test_flags_translation():
    assert flags({"clip_norm": 0.1, "fp16": True, "x": False, "adam_betas": "(0.9, 0.98)"}) == \
        ["--clip-norm", "0.1", "--fp16", "--adam-betas", "(0.9, 0.98)"]


def run_cli(*args, cwd):
    return subprocess.run([str(Path(sys.executable).parent / "posenc-run"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,expected", [
    (["placement=sideways"], "allowed: both, source, target, none"),
    (["model=nosuchmodel"], "fconv_small"),
])
def test_cli_refuses_bad_values_without_a_traceback(tmp_path, args, expected):
    proc = run_cli(*args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert expected in proc.stderr
    assert not (tmp_path / "run" / "result.json").exists()


def test_logger_is_checked_up_front():
    from posenc.harness.config.logger import check_logger
    check_logger(compose_cfg().logger)
    check_logger(compose_cfg("logger=wandb").logger)  # wandb is a main dependency (make setup)
    bad = compose_cfg("logger=wandb")
    bad.logger.name = "tensorboard"
    with pytest.raises(ConfigError, match=r"^logger='tensorboard' is not allowed; allowed: none, wandb$"):
        check_logger(bad.logger)


def test_a_grid_sweep_refuses_a_misspelt_value_instead_of_skipping_it(tmp_path):
    proc = run_cli("experiment=pe_grid", "pe=sinusodial", "model=fconv_small", "placement=both",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        ("posenc-run: error: pe='sinusodial' is not allowed; allowed: learned, sinusoidal, rope, alibi, t5, shaw, "
         "shape, cape")


@pytest.mark.parametrize("multirun", [False, True])
def test_a_bad_data_value_is_refused_with_the_other_values_before_the_lock_and_the_gpu_check(tmp_path, multirun):
    """``cfg.data`` is parsed as the cell is resolved: a bad data value is the one-line refusal of any
    other bad value, given before the cell's lock is taken and before the machine is asked for the GPU
    that ``gpus=1`` wants (this machine's refusal would otherwise come first); a sweep records it."""
    where = tmp_path / "cell"
    place = ["-m", f"hydra.sweep.dir={where}", "hydra.sweep.subdir=only"] if multirun else [f"hydra.run.dir={where}"]
    proc = run_cli(*place, "budget=smoke", "data.workers=0", "gpus=1", cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [x for x in proc.stderr.splitlines() if x.startswith("posenc-run: error:")] == \
        ["posenc-run: error: data.workers=0: must be >= 1"], proc.stderr[-3000:]
    job = where / "only" if multirun else where
    assert not (job / ".cell.lock").exists() and not (job / "commands.sh").exists()
    assert "corpus" not in proc.stdout + proc.stderr and not (tmp_path / ".posenc_cache").exists()
    if multirun:   # the sweep records the cell as refused (failed, with the refusal as its error) and goes on
        record = json.loads((job / "result.json").read_text())
        assert (record["status"], record["error"]) == ("failed", "data.workers=0: must be >= 1")
    else:
        assert proc.returncode == 2 and not (job / "result.json").exists()
