"""A cell's record (``result.json``): its fields, as one class, its statuses, its per-split names,
and how to read one back, old records included.

Every writer builds or changes a ``Record`` and writes it with ``Record.write``: the harness, its
signals, a SLURM job, the SLURM launcher and the refusals. Statuses are set and compared here
alone (``Record.finish`` and the ``is_*`` readers): no other module spells them. Every reader (the
report, the analysis, the harness's own summary, through ``posenc.cells.sweep``) gets ``Record``
values from ``Record.read``, and the accessors here take a ``Record`` (or None for no record).
docs/records.md lists the fields.
"""

import dataclasses
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic
from posenc.cells.layout import RESULT_FILE
from posenc.confdir import CONF_DIR
from posenc.metrics import bleu_signature_options, chrf_signature_options

# The contract's columns, in table order (results.csv keeps this order, extras after).
FIELDS = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "status",
          "error", "bleu", "bleu_signature", "tok_bleu", "valid_ppl", "test_sentences", "num_updates",
          "train_wall_s", "hypotheses", "job_dir")
# The cell's identity: what its configuration asked for (the rest of a record is its outcome).
IDENTITY = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed")

# ``status``: every status but OK has a non-empty ``error`` that says why.
OK = "ok"
FAILED = "failed"
INTERRUPTED = "interrupted"  # a signal to the harness (SIGTERM, SIGINT): a rerun resumes it
RUNNING = "running"          # written when the cell starts; still there: it is running, or was killed outright
PRUNED = "pruned"            # a tuning trial stopped early by its study (with a save): finished, not scored
STATUSES = (OK, FAILED, INTERRUPTED, RUNNING, PRUNED)
RUNNING_ERROR = "still running, or stopped without recording an outcome (killed outright?)"

# The test splits a cell may be scored on: ``test`` always, ``test_long`` where the corpus has one.
SPLITS = ("test", "test_long")

# ``stopped_by``: what ended a cell's training (max_epoch, max_update, TIME_CAP, early_stop or stop_min_lr:
# posenc.harness.fairseq_logs.stopped_by). A cell that budget.max_time_min stopped is finished but not
# whole: its score depends on the machine's speed.
TIME_CAP = "time_cap"


def field(name: str, split: str) -> str:
    """A record's field for a split: no suffix for test (``bleu``), ``_<split>`` otherwise
    (``bleu_test_long``)."""
    return name if split == "test" else f"{name}_{split}"


@dataclass
class Split:
    """One test split's scores, as ``result.json`` has them for the test split (``bleu``, ...)
    and, with ``_<split>`` (``field``), for another (``bleu_test_long``, ...)."""
    bleu: float = None
    bleu_signature: str = None
    bleu_options: dict = None
    tok_bleu: float = None
    chrf: float = None
    chrf_signature: str = None
    chrf_options: dict = None
    test_sentences: int = None
    hypotheses: str = None
    generate_wall_s: float = None


# The fields a scored split has (``field(name, split)`` names them in a record).
SPLIT_FIELDS = tuple(f.name for f in dataclasses.fields(Split))


@dataclass
class Record:
    """Every field a cell's ``result.json`` can have; ``None`` (or "") until the cell has it."""
    # identity: what the configuration asked for, and the kinds it resolved to
    experiment: str = None
    model: str = None
    data: str = None
    pe: str = None
    placement: str = None
    encoder_pos: str = ""
    decoder_pos: str = ""
    seed: int = None
    family: str = None
    trial: int = None       # a tuning trial's number (hydra/sweeper=posenc_tune): validated, never scored on test
    # outcome
    status: str = RUNNING
    error: str = RUNNING_ERROR
    # scores on each test split, one ``Split`` each (``result.json`` keeps them flat: ``bleu``,
    # ``bleu_test_long``; the record reads and sets them by those names too)
    test: Split = dataclasses.field(default_factory=lambda: Split(bleu_signature="", hypotheses=""))
    test_long: Split = dataclasses.field(default_factory=Split)  # where the corpus has one
    # training (fairseq's log)
    valid_ppl: float = None
    valid_loss: float = None  # fairseq's validation loss of the best checkpoint: a tuning trial's objective
    num_updates: int = None
    epochs: int = None
    best_epoch: int = None
    stopped_by: str = None
    device: str = None
    gpu_index: str = None  # the GPU(s) it ran on, in nvidia-smi's numbering (several cells share a node)
    gpu_uuid: str = None
    train_wall_s: float = None
    resumed_from_update: int = 0
    # every resume restored all a cell draws from (posenc.trainer.exact_resume); None: never resumed
    resume_exact: bool = None
    # why a resume was not exact (resume_exact false): "update N: why" for each (posenc.trainer.exactness)
    resume_inexact_reason: str = None
    # runtime.deterministic: trained in the deterministic GPU mode (posenc.trainer.deterministic)
    deterministic: bool = None
    # the cell
    job_dir: str = ""
    config_hash: str = None
    corpus: dict = None
    cell_wall_s: float = None
    # a field this version does not know (a record from a newer posenc): kept, written back as read
    extra: dict = dataclasses.field(default_factory=dict)
    # The fields the result.json it was read from lacked (an older or foreign record). Their values
    # are the defaults above, for its writers; its readers tell such a field from one recorded
    # empty: a record without a status has none ("unknown", not running), and results.csv lists
    # the columns the records have. ``finish`` and ``update`` set a field: it is absent no more.
    absent: frozenset = dataclasses.field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def names(cls) -> tuple:
        """The record's fields, in the order ``result.json`` has them: a split's by ``field``."""
        return tuple(name for f in dataclasses.fields(cls) if f.name not in ("extra", "absent")
                     for name in ([field(n, f.name) for n in SPLIT_FIELDS] if f.name in SPLITS else [f.name]))

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        """A record as read from a ``result.json`` of any version: missing fields keep their
        defaults (and are ``absent``), unknown ones go to ``extra``."""
        known = cls.names()
        record = cls(**{k: v for k, v in data.items() if k in known and k not in _SPLIT_NAMES},
                     extra={k: v for k, v in data.items() if k not in known},
                     absent=frozenset(k for k in known if k not in data))
        for name in _SPLIT_NAMES.intersection(data):
            setattr(record, name, data[name])
        return record

    def split(self, split: str) -> Split:
        """The scores of a split (one of SPLITS)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
        return getattr(self, split)

    @classmethod
    def read(cls, job_dir: Path):
        """The cell's record, or None when there is none or it cannot be parsed."""
        record, _ = cls.read_why(job_dir)
        return record

    @classmethod
    def read_why(cls, job_dir: Path):
        """``(record, "")``, ``(None, "")`` when there is no ``result.json``, or ``(None, why)`` when
        it cannot be read as a record (torn, foreign: the cell counts as not finished)."""
        path = Path(job_dir) / RESULT_FILE
        if not path.exists():
            return None, ""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as err:
            return None, type(err).__name__
        return (cls.from_dict(data), "") if isinstance(data, dict) else (None, "not a JSON object")

    def to_dict(self) -> dict:
        """What ``result.json`` holds: every field with a value (the long split's only where it
        was scored), then ``extra``."""
        out = {}
        for name in self.names():
            value = getattr(self, name)
            if value is None and name in _ONLY_WHEN_SET:
                continue
            out[name] = value
        return {**out, **self.extra}

    def as_read(self) -> dict:
        """The fields its ``result.json`` had, as it had them (every field, for a record built
        here), then ``extra``: one line of ``results.csv``."""
        return {**{name: getattr(self, name) for name in self.names() if name not in self.absent}, **self.extra}

    def write(self, job_dir: Path) -> None:
        """Write ``result.json`` atomically: a reader sees the old record or this one, never a torn one."""
        write_json_atomic(Path(job_dir) / RESULT_FILE, self.to_dict())

    def update(self, values: dict) -> None:
        """Set fields by name (``{"valid_ppl": ..., "num_updates": ...}``); the status only through
        ``finish``. An unknown name is a bug in its writer: AttributeError."""
        for name, value in values.items():
            if name not in self.names() or name in ("status", "error"):
                raise AttributeError(f"{name!r} is not a record field that can be set (the status: Record.finish)")
            setattr(self, name, value)
        self.absent = self.absent - set(values)

    def scores(self, split: str, values: dict) -> None:
        """Set a split's fields from ``{"bleu": ..., "chrf": ...}`` (``Split``'s names)."""
        self.update({field(name, split): value for name, value in values.items()})

    def finish(self, status: str, error: str = "") -> None:
        """End the record as ``status``; every status but OK needs its reason."""
        if status not in STATUSES:
            raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if status != OK and not error:
            raise ValueError(f"a {status} record needs an error that says why")
        self.status, self.error = status, (error if status != OK else "")
        self.absent = self.absent - {"status", "error"}

    def succeed(self) -> None:
        self.finish(OK)

    def fail(self, error: str) -> None:
        self.finish(FAILED, error)

    def interrupt(self, error: str) -> None:
        self.finish(INTERRUPTED, error)

    def prune(self, error: str) -> None:
        self.finish(PRUNED, error)

    @property
    def ok(self) -> bool:
        return self.status == OK


def _split_property(split: str, name: str) -> property:
    def get(record):
        return getattr(getattr(record, split), name)

    def set_(record, value):
        setattr(getattr(record, split), name, value)
    return property(get, set_, doc=f"``{split}.{name}``, by the name ``result.json`` has it")


# A split's fields by their names in ``result.json`` (``bleu``, ``bleu_test_long``), which readers
# and ``Record.update`` use.
_SPLIT_NAMES = frozenset(field(name, split) for split in SPLITS for name in SPLIT_FIELDS)
for _split in SPLITS:
    for _name in SPLIT_FIELDS:
        setattr(Record, field(_name, _split), _split_property(_split, _name))

# Fields written only once a cell has them (the long split, training's details, the cell's timings).
_ONLY_WHEN_SET = frozenset({*(field(n, "test_long") for n in SPLIT_FIELDS),
                            "bleu_options", "chrf_options", "chrf_signature", "generate_wall_s", "epochs",
                            "best_epoch", "stopped_by", "device", "gpu_index", "gpu_uuid", "config_hash", "corpus",
                            "cell_wall_s", "trial", "valid_loss", "resume_exact", "resume_inexact_reason",
                            "deterministic"})


def new_record(identity: dict, job_dir: Path, family: str, error: str = "") -> Record:
    """A cell's record before it has an outcome: ``running`` (or ``failed`` with ``error``, a
    cell refused before it started), every score empty."""
    record = Record(**{key: identity.get(key) for key in IDENTITY}, family=family, job_dir=str(job_dir))
    if error:
        record.fail(error)
    return record


def is_ok(record: Record) -> bool:
    """Whether a record (None: no record) finished ok."""
    return status_of(record) == OK


def is_failed(record: Record) -> bool:
    return status_of(record) == FAILED


def is_interrupted(record: Record) -> bool:
    return status_of(record) == INTERRUPTED


def is_pruned(record: Record) -> bool:
    return status_of(record) == PRUNED


def is_trial(record: Record) -> bool:
    """A tuning trial's record (``trial`` set): it has a validation loss and no test scores."""
    return record is not None and record.trial is not None


def status_of(record: Record):
    """The record's status; None for no record, or one whose file has none (a foreign result.json)."""
    return None if record is None or "status" in record.absent else record.status


def error_of(record: Record):
    """Why the record is not ok; None where its file says nothing (no ``error``)."""
    return None if "error" in record.absent else record.error


def time_capped(record: Record) -> bool:
    return record.stopped_by == TIME_CAP


def inexact_resume(record: Record) -> bool:
    """Whether a record's training was resumed in a way that may differ from an uninterrupted run:
    resumed, and not known to be exact (a record from before ``resume_exact``, or a resume the trainer
    said was inexact: ``resume_inexact_reason`` says why)."""
    return record is not None and bool(record.resumed_from_update) and record.resume_exact is not True


def family(record: Record) -> str:
    """The record's model family; records written before it was recorded: the family of their
    model's config, ``conf/model/<model>.yaml`` ("unknown" without one)."""
    return str(record.family or config_family(str(record.model)))


@cache
def config_family(model_name: str) -> str:
    """``"fconv"``, ``"transformer"``, or ``"unknown"`` for a model config name with no file."""
    path = CONF_DIR / "model" / f"{model_name}.yaml"
    if not path.is_file():
        return "unknown"
    # ``model.family`` (model configs are in Hydra's _global_ package); else a top-level ``family:``,
    # the layout a model config has without an optim group, which a user's own config may keep.
    cfg = OmegaConf.load(path)
    return str(OmegaConf.select(cfg, "model.family", default=None) or cfg.get("family", "unknown"))


def bleu_options(record: Record, split: str = "test") -> dict:
    """The ``sacrebleu.metrics.BLEU(...)`` arguments the split was scored with: as recorded, or
    for records written before they were, parsed from the split's signature."""
    recorded = record.split(split).bleu_options
    if isinstance(recorded, dict):
        return dict(recorded)
    return bleu_signature_options(str(record.split(split).bleu_signature or ""))


def chrf_options(record: Record, split: str = "test") -> dict:
    """The ``sacrebleu.metrics.CHRF(...)`` arguments the split was scored with: as recorded, or
    for records written before they were, parsed from the split's chrF signature; records from
    before chrF++ was recorded have none: chrF++ with BLEU's casing."""
    recorded = record.split(split).chrf_options
    if isinstance(recorded, dict):
        return dict(recorded)
    signature = str(record.split(split).chrf_signature or "")
    options = chrf_signature_options(signature)
    if not signature and bleu_options(record, split).get("lowercase"):
        options["lowercase"] = True
    return options
