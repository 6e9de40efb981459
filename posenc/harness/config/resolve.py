"""A cell resolved once: the composed config turned into values, with every refusal here.

``resolve_cell`` is the one reader of a cell's composed config. It returns a ``Resolved``: how the
job names and shows the cell (read key by key, so that a refused cell still has a record), and
then exactly one of the checked ``ResolvedCell``, the reason the grid skips it by design
(``skip_impossible``), or the refusal (``ConfigError``, one line) of a value on its own or against
the others (model family, placement and kind; the corpus's ``data`` keys; precision and GPUs; the
budget's limits and the schedule's length; the children's environment; the logger). The user's
kinds file is loaded (read and hashed) once, by ``cell_spec``, and the hashes take its digest.
What the lifecycle, the fairseq
commands, resuming, the record, the resources of cells side by side and the W&B run need is then
read from the ``ResolvedCell``, never from the config again. The one check left for later is the
machine's (``precision.check_hardware``): a cell finished earlier is kept without asking for a GPU.
"""

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from posenc.corpora import CorpusConfig, CorpusError, parse_corpus_config
from posenc.harness.config.environment import AUTO, added_environment, cells_per_gpu, deterministic, warm_trainer
from posenc.harness.config.limits import RunLength, StepLimits, run_length, step_limits
from posenc.harness.config.logger import check_logger
from posenc.harness.config.precision import check_gpu_settings
from posenc.harness.config.schema import default
from posenc.harness.config.spec import CellSpec, cell_spec, check_possible
from posenc.harness.errors import ConfigError
from posenc.harness.hashing import Hashes, cell_hashes
from posenc.kinds import grid_skip_reason
from posenc.kinds.file import ENV as KINDS_ENV

REDO_INEXACT = "inexact"  # redo=inexact: retrain from scratch the cells resumed inexactly (issue 48), keep the rest


@dataclass(frozen=True)
class Generation:
    beam: int
    batch_size: int
    max_len_a: float
    max_len_b: int
    test_long: bool


@dataclass(frozen=True)
class ResolvedCell:
    """Everything one cell runs with, as plain values: no methods, so that whoever reads the cell
    does the reading where it runs, and a cell's run never comes back here. ``data`` is the corpus's
    config as the corpora package parses it; ``resolved_config`` is the whole config
    as plain data, for a logger that records what the cell ran with (a W&B run's config), None with
    ``logger=none``."""
    spec: CellSpec
    identity: dict          # experiment, model, data, pe, placement, encoder_pos, decoder_pos, seed
    seed: int
    limits: StepLimits      # hard limits of the fairseq steps
    length: RunLength       # where training stops (--max-epoch, --max-update)
    environment: dict       # what the harness adds to fairseq's environment (commands.sh exports it)
    precision: str
    gpus: int
    model_args: dict        # fairseq flags of the model (model.args)
    optim_args: dict        # fairseq flags of how it is trained (optim.args)
    max_tokens: int
    max_time_min: float     # --stop-time-hours, over every run of a resumed cell
    save_interval_updates: int
    generation: Generation
    data: CorpusConfig      # cfg.data, parsed and checked
    cache_dir: Path
    keep_checkpoints: str
    redo: object            # False, True (every cell afresh) or REDO_INEXACT (cells resumed inexactly afresh)
    logger: dict            # the logger group (name, project, ...)
    hashes: Hashes          # config and training hashes, today's and before the optim group
    resolved_config: dict = None
    trial: int = None       # a tuning trial's number: trained and validated, never scored on test
    cells_per_gpu: object = 1  # runtime.cells_per_gpu: "auto" or how many cells share a GPU side by side
    warm_trainer: bool = False  # runtime.warm_trainer: the trainer forked by a warm one (posenc.harness.run.warm)
    deterministic: bool = False  # runtime.deterministic: the trainer's deterministic GPU mode


@dataclass(frozen=True)
class CellName:
    """What names a cell before any check: its identity read key by key (any key may be the bad
    one), its model family and tuning trial, and the words the job's progress lines name it by."""
    identity: dict          # experiment, model, data, pe, placement, seed, as the config gives them
    family: str
    trial: object
    where: str              # placement=.. pe=.. seed=.. model=.. (trial=..)


@dataclass(frozen=True)
class Resolved:
    """The composed config read once: the cell's name and how its progress is shown, then exactly
    one of the checked ``cell``, why the grid ``skipped`` it by design, or why it is ``refused``."""
    name: CellName
    max_epoch: int
    max_time_min: float
    progress: bool
    cell: ResolvedCell = None
    skipped: str = ""
    refused: ConfigError = None


def resolve_cell(cfg) -> Resolved:
    """The composed config of one cell, read once (the only reader of ``cfg`` in a cell's run)."""
    name = _name(cfg)
    shown = {"max_epoch": int(cfg.budget.max_epoch), "max_time_min": float(cfg.budget.max_time_min),
             "progress": bool(cfg.progress)}
    try:
        spec, kinds = cell_spec(cfg)  # a misspelt value is an error, not a cell to skip
        if cfg.skip_impossible:
            reason = grid_skip_reason(spec.family, spec.pe, spec.placement)
            if reason:
                return Resolved(name, **shown, skipped=reason)
        return Resolved(name, **shown, cell=_cell(cfg, name, spec, kinds))
    except ConfigError as refused:
        return Resolved(name, **shown, refused=refused)


def corpus_config(data) -> CorpusConfig:
    """``cfg.data`` parsed; its CorpusError (one line naming the key) as the cell's refusal."""
    try:
        return parse_corpus_config(data)
    except CorpusError as err:
        raise ConfigError(str(err)) from None


def _name(cfg) -> CellName:
    def get(key):
        return OmegaConf.select(cfg, key, default=None)
    identity = {"experiment": get("experiment_name"), "model": get("model.name"), "data": get("data.name"),
                "pe": get("pe"), "placement": get("placement"), "seed": get("seed")}
    trial = get("trial")
    where = " ".join(f"{key}={identity[key]}" for key in ("placement", "pe", "seed", "model"))
    if trial is not None:
        where += f" trial={trial}"
    return CellName(identity, get("model.family"), trial, where)


def _cell(cfg, name: CellName, spec: CellSpec, kinds) -> ResolvedCell:
    """The checked ``ResolvedCell`` of ``spec`` and the user's kinds file ``kinds`` (loaded once, by
    ``cell_spec``; fairseq's children load it from the variable); ConfigError (one line) otherwise."""
    check_possible(spec, cfg.model.name)
    data = corpus_config(cfg.data)  # a bad data key is refused here, with every other value, before any work
    check_logger(cfg.logger)
    check_gpu_settings(cfg)
    environment = {**added_environment(cfg.runtime), **({KINDS_ENV: str(kinds.path)} if kinds else {})}
    limits = step_limits(cfg.budget)
    length = run_length(cfg)  # a run nothing ends is refused before any work
    trial = cfg.get("trial", default("trial"))
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int) or trial < 0):
        raise ConfigError(f"trial={trial!r} is not allowed; allowed: null (a cell scored on test) or a tuning "
                          "trial's number >= 0 (hydra/sweeper=posenc_tune sets it)")
    budget, gen = cfg.budget, cfg.generation
    logger = OmegaConf.to_container(cfg.logger, resolve=True)
    identity = {**name.identity, "encoder_pos": spec.encoder_pos, "decoder_pos": spec.decoder_pos,
                "seed": int(cfg.seed)}
    resolved_config = None
    if logger.get("name") != "none":  # what a logger records the cell ran with; Hydra's own node is no part of it
        resolved_config = OmegaConf.to_container(cfg, resolve=True)
        resolved_config.pop("hydra", None)
    return ResolvedCell(
        spec=spec, identity=identity, seed=int(cfg.seed), limits=limits, length=length, environment=environment,
        precision=cfg.precision, gpus=cfg.gpus,
        model_args=OmegaConf.to_container(cfg.model.args, resolve=True),
        optim_args=OmegaConf.to_container(cfg.optim.args, resolve=True),
        max_tokens=budget.max_tokens, max_time_min=float(budget.max_time_min),
        save_interval_updates=int(budget.get("save_interval_updates", 0) or 0),
        generation=Generation(gen.beam, gen.batch_size, gen.max_len_a, gen.max_len_b, bool(gen.test_long)),
        data=data, cache_dir=Path(cfg.paths.cache_dir), keep_checkpoints=cfg.keep_checkpoints,
        redo=redo_setting(cfg.get("redo", default("redo"))), logger=logger, hashes=cell_hashes(cfg, kinds),
        resolved_config=resolved_config,
        trial=trial, cells_per_gpu=cells_per_gpu(cfg.runtime.get("cells_per_gpu", AUTO)),
        warm_trainer=warm_trainer(cfg.runtime.get("warm_trainer", True)),
        deterministic=deterministic(cfg.runtime.get("deterministic", False)))


def redo_setting(value):
    """``redo``: false, true, or ``inexact``; anything else is refused in one line."""
    if isinstance(value, bool) or value == REDO_INEXACT:
        return value
    raise ConfigError(f"redo={value!r} is not allowed; allowed: false, true (every cell afresh), "
                      f"{REDO_INEXACT} (only cells resumed inexactly afresh)")
