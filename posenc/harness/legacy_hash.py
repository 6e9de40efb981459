"""Cells hashed before the optimiser left the budget keep their results and checkpoints.

Until the ``optim`` group existed, each budget carried both families' optimisers
(``budget.optim.fconv``, ``budget.optim.transformer``), so every cell's config and training hashes
covered them. The move changes no cell's training, only where its configuration says so; without
this module every earlier cell would be trained again. ``before_optim_group`` rebuilds the old
layout of a configuration: the budget's two blocks as they were, the cell's own family's block
being the cell's ``optim.args`` (so an override of it carries over). A recorded hash that equals
the rebuilt one proves the cell is the same; anything else (another optimiser, a schedule with a
length of its own, a budget of the user's) does not match, and the cell is run again, as before.
"""

import copy

from posenc.harness.records import digest, hashed_config

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


def before_optim_group(cfg, ignore=()) -> str:
    """The hash ``config_hash(cfg, ignore)`` had before the optim group; "" where no earlier
    configuration trained the same way (a schedule with its own length did not exist)."""
    data = hashed_config(cfg, ignore)
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
