"""A cell resolved once: the composed config turned into a ``Cell`` value, with every refusal here.

``resolve_cell`` checks the values on their own and against each other (model family, placement
and kind; precision and GPUs; the budget's limits and the schedule's length; the children's
environment; the logger) and raises ``ConfigError`` with one line. What the lifecycle, the fairseq
commands, resuming, the record and the W&B run need is then read from the ``Cell``, never from the
config again. The one check left for later is the machine's (``precision.check_hardware``): a cell
finished earlier is kept without asking for a GPU.
"""

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from posenc.cells.record import Record, new_record
from posenc.harness.cell.environment import added_environment
from posenc.harness.cell.limits import RunLength, StepLimits, run_length, step_limits
from posenc.harness.cell.precision import check_gpu_settings
from posenc.harness.cell.spec import CellSpec, cell_spec, user_kinds
from posenc.harness.errors import ConfigError
from posenc.harness.hashing import Hashes, cell_hashes
from posenc.harness.tracking.wandb_run import check_logger
from posenc.kinds_file import ENV as KINDS_ENV


@dataclass(frozen=True)
class Generation:
    beam: int
    batch_size: int
    max_len_a: float
    max_len_b: int
    test_long: bool


@dataclass(frozen=True)
class Cell:
    """Everything one cell runs with. ``data`` stays the corpus's own config node (the corpora
    package reads it); ``wandb_config`` is the resolved config a W&B run records (logger=wandb)."""
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
    data: object            # the corpus config (cfg.data)
    cache_dir: Path
    keep_checkpoints: str
    redo: bool
    logger: dict            # the logger group (name, project, ...)
    hashes: Hashes          # config and training hashes, today's and before the optim group
    wandb_config: dict = None
    trial: int = None       # a tuning trial's number: trained and validated, never scored on test

    @property
    def is_trial(self) -> bool:
        return self.trial is not None

    @property
    def experiment(self) -> str:
        return self.identity["experiment"]

    @property
    def family(self) -> str:
        return self.spec.family

    def new_record(self, job_dir: Path) -> Record:
        """The cell's record as it starts: ``running``, its identity and hash, no scores yet."""
        record = new_record(self.identity, job_dir, self.family)
        record.config_hash = self.hashes.config
        record.trial = self.trial
        return record


def resolve_cell(cfg) -> Cell:
    """The composed config of one cell as a checked ``Cell``; ConfigError (one line) otherwise."""
    spec = cell_spec(cfg)
    check_logger(cfg.logger)
    check_gpu_settings(cfg)
    kinds = user_kinds(cfg)  # loaded by cell_spec's checks; fairseq's children load it from the variable
    environment = {**added_environment(cfg.runtime), **({KINDS_ENV: str(kinds.path)} if kinds else {})}
    limits = step_limits(cfg.budget)
    length = run_length(cfg)  # a run nothing ends is refused before any work
    budget, gen = cfg.budget, cfg.generation
    logger = OmegaConf.to_container(cfg.logger, resolve=True)
    identity = {"experiment": cfg.experiment_name, "model": cfg.model.name, "data": cfg.data.name, "pe": cfg.pe,
                "placement": cfg.placement, "encoder_pos": spec.encoder_pos, "decoder_pos": spec.decoder_pos,
                "seed": int(cfg.seed)}
    return Cell(
        spec=spec, identity=identity, seed=int(cfg.seed), limits=limits, length=length, environment=environment,
        precision=cfg.precision, gpus=cfg.gpus,
        model_args=OmegaConf.to_container(cfg.model.args, resolve=True),
        optim_args=OmegaConf.to_container(cfg.optim.args, resolve=True),
        max_tokens=budget.max_tokens, max_time_min=float(budget.max_time_min),
        save_interval_updates=int(budget.get("save_interval_updates", 0) or 0),
        generation=Generation(gen.beam, gen.batch_size, gen.max_len_a, gen.max_len_b, bool(gen.test_long)),
        data=cfg.data, cache_dir=Path(cfg.paths.cache_dir), keep_checkpoints=cfg.keep_checkpoints,
        redo=bool(cfg.get("redo", False)), logger=logger, hashes=cell_hashes(cfg),
        wandb_config=_wandb_config(cfg) if logger.get("name") != "none" else None, trial=_trial(cfg))


def _trial(cfg):
    value = cfg.get("trial")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"trial={value!r} is not allowed; allowed: null (a cell scored on test) or a tuning "
                          "trial's number >= 0 (hydra/sweeper=posenc_tune sets it)")
    return value


def _wandb_config(cfg) -> dict:
    config = OmegaConf.to_container(cfg, resolve=True)
    config.pop("hydra", None)
    return config


def refused_record(cfg, job_dir: Path, error: str) -> Record:
    """The record of a sweep cell refused before any work (a value it cannot take): failed, with
    the refusal as its error, so the sweep goes on and its table shows the cell. Read key by key:
    any of them may be the bad one."""
    def get(key):
        return OmegaConf.select(cfg, key, default=None)
    identity = {"experiment": get("experiment_name"), "model": get("model.name"), "data": get("data.name"),
                "pe": get("pe"), "placement": get("placement"), "seed": get("seed")}
    return new_record(identity, job_dir, get("model.family"), error)
