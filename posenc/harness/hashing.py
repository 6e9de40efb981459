"""A cell's fingerprints, computed here alone: ``config_hash`` (everything that decides its
outcome; its record and W&B run carry it) and ``training_hash`` (everything that decides its
checkpoints; ``state.json`` carries it), and the one place a rerun recognises the hashes cells had
before the optim group (``Hashes``).

Cells hashed before the optimiser left the budget keep their results and checkpoints.

A kind whose behaviour changed has a revision above 0 (``posenc.kinds.register_kind``), which
enters the hashes of the cells that use it (``kind_revisions`` in the hashed data): those cells are
trained again, never taken for the ones trained with the old behaviour. A kind at revision 0 adds
nothing, so its cells keep the hashes they always had.

Until the ``optim`` group existed, each budget carried both families' optimisers
(``budget.optim.fconv``, ``budget.optim.transformer``), so every cell's config and training hashes
covered them. The move changes no cell's training, only where its configuration says so; without
this every earlier cell would be trained again. ``before_optim_group`` rebuilds the old
layout of a configuration: the budget's two blocks as they were, the cell's own family's block
being the cell's ``optim.args`` (so an override of it carries over). A recorded hash that equals
the rebuilt one proves the cell is the same; anything else (another optimiser, a schedule with a
length of its own, a budget of the user's) does not match, and the cell is run again, as before.
"""

import copy
import hashlib
import json
from dataclasses import dataclass

from omegaconf import OmegaConf

from posenc.cells.keys import NOT_OUTCOME, NOT_TRAINING, NULL_IS_ABSENT
from posenc.kinds import kind_revisions, side_kinds
from posenc.kinds.file import content_digest


def config_hash(cfg, ignore=(), kinds_sha256: str = None) -> str:
    """Fingerprint of everything that determines a cell's outcome (the resolved config without
    the keys, top-level or dotted, in NOT_OUTCOME and ``ignore``, and the NULL_IS_ABSENT keys, top-level
    or dotted, while they are null)."""
    return digest(hashed_config(cfg, ignore, kinds_sha256))


def training_hash(cfg) -> str:
    """Fingerprint of everything that determines a cell's checkpoints."""
    return config_hash(cfg, ignore=NOT_TRAINING)


def hashed_config(cfg, ignore=(), kinds_sha256: str = None) -> dict:
    """What ``config_hash`` fingerprints, as plain data. Keys are resolved one by one, so an
    ignored top-level key is never resolved (``runtime`` reads the launcher's settings, which
    exist only inside a job). ``kinds_sha256``: the user's kinds file's digest where it is loaded
    already (``KindsFile.sha256``); else the file is read here."""
    skip = set(NOT_OUTCOME) | set(ignore)
    data = {key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key]) else cfg[key]
            for key in cfg if key not in skip and not (key in NULL_IS_ABSENT and cfg[key] is None)}
    for dotted in (k for k in (*skip, *NULL_IS_ABSENT) if "." in k):
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and (dotted in skip or (leaf in node and node[leaf] is None)):
            node.pop(leaf, None)
    if data.get("kinds_module") is not None:  # the user's kinds file: its content, wherever it lies
        data["kinds_module"] = {"sha256": kinds_sha256 or content_digest(data["kinds_module"])}
    revisions = cell_kind_revisions(cfg)
    if revisions:  # a kind whose behaviour changed: its cells are not the ones trained before
        data[KIND_REVISIONS] = revisions
    if deterministic_gpu(cfg):  # other kernels, other bits: not the cell trained without the mode
        data[DETERMINISTIC] = True
    return data


# The hashed data's entry for ``runtime.deterministic=true`` (posenc.trainer.deterministic), the one
# runtime setting that changes a result: present only where it does, so every other cell keeps its
# hash (the default false; a CPU cell, gpus=0, whose kernels are deterministic already).
DETERMINISTIC = "deterministic"


def deterministic_gpu(cfg) -> bool:
    runtime = cfg.get("runtime")
    return bool(runtime is not None and runtime.get("deterministic") is True and cfg.get("gpus") != 0)


# The hashed data's entry for the revisions of the cell's kinds (``posenc.kinds.register_kind``):
# present only where a kind the cell uses has a revision above 0, so every other cell keeps its hash.
KIND_REVISIONS = "kind_revisions"


def cell_kind_revisions(cfg) -> dict:
    """``{kind: revision}`` of the kinds the cell puts on its sides (``placement`` and ``pe``) whose
    revision is above 0; {} for a config without them or with values the cell's checks refuse."""
    placement, pe = cfg.get("placement"), cfg.get("pe")
    if not isinstance(placement, str) or not isinstance(pe, str):
        return {}
    try:
        kinds = side_kinds(placement, pe)
    except ValueError:
        return {}
    return kind_revisions(kinds)


def digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Hashes:
    """A cell's two fingerprints, and what the same configuration hashed to before the optim group
    ("" where no earlier configuration trained the same way)."""
    config: str
    training: str
    config_before_optim: str = ""
    training_before_optim: str = ""

    def recognised_config(self, recorded) -> str:
        """Today's config hash when ``recorded`` (a finished record's) fingerprints this very
        configuration, today or before the optim group; "" when it is neither (an empty
        recorded hash proves nothing)."""
        return self.config if recorded and recorded in (self.config, self.config_before_optim) else ""

    def recognised_training(self, recorded) -> str:
        """The same for the hash the cell's checkpoints were saved under (``state.json``)."""
        return self.training if recorded and recorded in (self.training, self.training_before_optim) else ""


def cell_hashes(cfg, kinds=None) -> Hashes:
    """Both hashes of a composed config, and their pre-optim-group versions (``kinds``: the user's
    loaded ``KindsFile``, whose digest they take, or None). The one place a rerun consults the old
    hashes: ``Hashes.recognised_*``."""
    digest_ = kinds.sha256 if kinds is not None else None
    config, training = hashed_config(cfg, (), digest_), hashed_config(cfg, NOT_TRAINING, digest_)
    return Hashes(digest(config), digest(training), before_optim_group(config), before_optim_group(training))


# --- before the optim group --------------------------------------------------------------------
_ADAM_FCONV = {"optimizer": "adam", "lr": 0.002, "clip_norm": 0.1, "criterion": "label_smoothed_cross_entropy",
               "label_smoothing": 0.1}
_ADAM_TRANSFORMER = {"optimizer": "adam", "adam_betas": "(0.9, 0.98)", "lr": 0.002, "lr_scheduler": "inverse_sqrt",
                     "warmup_updates": 200, "clip_norm": 0.0, "criterion": "label_smoothed_cross_entropy",
                     "label_smoothing": 0.1}
# conf/budget/<name>.yaml's ``optim:`` block as the last release before the group had it.
BUDGET_OPTIM = {
    "smoke": {"fconv": _ADAM_FCONV,
              "transformer": {"optimizer": "adam", "adam_betas": "(0.9, 0.98)", "lr": 0.001, "clip_norm": 0.0,
                              "criterion": "label_smoothed_cross_entropy", "label_smoothing": 0.1}},
    "cpu": {"fconv": _ADAM_FCONV, "transformer": _ADAM_TRANSFORMER},
    "paper": {"fconv": {"optimizer": "nag", "lr": 0.25, "momentum": 0.99, "clip_norm": 0.1,
                        "lr_scheduler": "reduce_lr_on_plateau", "lr_shrink": 0.1, "stop_min_lr": 0.0001,
                        "dropout": 0.2, "criterion": "cross_entropy"},
              "transformer": {"optimizer": "adam", "adam_betas": "(0.9, 0.98)", "lr": 0.0007,
                              "lr_scheduler": "inverse_sqrt", "warmup_updates": 4000, "warmup_init_lr": 1.0e-07,
                              "clip_norm": 0.0, "dropout": 0.1, "criterion": "label_smoothed_cross_entropy",
                              "label_smoothing": 0.1}},
}


def before_optim_group(hashed: dict) -> str:
    """The hash the config whose ``hashed_config`` is ``hashed`` had before the optim group; ""
    where no earlier configuration trained the same way (a schedule with its own length did not exist)."""
    data = copy.deepcopy(hashed)
    optim, budget = data.pop("optim", None), data.get("budget")
    family = (data.get("model") or {}).get("family")
    if not optim or optim.get("max_update") or not isinstance(budget, dict) or budget.get("name") not in BUDGET_OPTIM:
        return ""
    blocks = copy.deepcopy(BUDGET_OPTIM[budget["name"]])
    if family not in blocks:
        return ""
    blocks[family] = optim.get("args") or {}
    budget["optim"] = blocks
    return digest(data)
