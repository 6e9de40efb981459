"""What fairseq-train's loop carries from update to update that its checkpoint does not (fairseq-fixed
0.12.3.1): saved with the random states by ``posenc.trainer.exact_resume`` and restored from them.

- The plateau schedule (``reduce_lr_on_plateau``): fairseq saves torch's ReduceLROnPlateau's
  ``best`` and ``last_epoch`` only; ``num_bad_epochs`` and ``cooldown_counter`` (which decide when
  ``lr_patience`` > 0 shrinks the lr) are kept here, and all four are restored together.
- The epoch's lr step: ``fairseq_cli.train`` saves an epoch's last checkpoint, then calls
  ``lr_step(epoch, val_loss)``, which is where the plateau schedule decides the next epoch's lr. A
  process resumed from that checkpoint calls ``lr_step(epoch + 1)`` without a loss instead: the
  decision is lost. ``replay_epoch_end`` takes the step as the uninterrupted run did, with the
  validation loss fairseq saved in the checkpoint (``extra_state["val_loss"]``).
- Early stopping (``--patience``): ``fairseq_cli.train.should_stop_early`` counts validations without
  improvement in attributes of its own (``best``, ``num_runs``), never saved.
- fp16's loss scaler (``DynamicLossScaler``): fairseq saves ``loss_scale``; the counters that
  decide its next growth (``_iter``, ``_last_overflow_iter``, ...) start from 0 on a resume.
"""

import torch
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler

PLATEAU_KEYS = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch", "_last_lr")
SCALER_KEYS = ("loss_scale", "_iter", "_last_overflow_iter", "_last_rescale_iter", "_overflows_since_rescale")
EARLY_STOP_KEYS = ("best", "num_runs")


def plateau(trainer):
    """torch's ReduceLROnPlateau inside the trainer's schedule, or None for another schedule."""
    inner = getattr(trainer.lr_scheduler, "lr_scheduler", None)
    return inner if isinstance(inner, torch.optim.lr_scheduler.ReduceLROnPlateau) else None


def loss_scaler(trainer):
    """fp16's dynamic loss scaler (FP16Optimizer, MemoryEfficientFP16Optimizer), or None."""
    scaler = getattr(trainer.optimizer, "scaler", None)
    return scaler if isinstance(scaler, DynamicLossScaler) else None


def early_stopping():
    from fairseq_cli import train  # imported by the trainer's entry first (it sets up fairseq's logging)

    return train.should_stop_early


def _attributes(holder, keys) -> dict:
    return {key: getattr(holder, key) for key in keys if hasattr(holder, key)}


def capture(trainer) -> dict:
    """The loop's state, in types a checkpoint loads without pickled objects."""
    schedule, scaler = plateau(trainer), loss_scaler(trainer)
    return {"plateau": _attributes(schedule, PLATEAU_KEYS) if schedule else None,
            "early_stop": _attributes(early_stopping(), EARLY_STOP_KEYS),
            "loss_scaler": _attributes(scaler, SCALER_KEYS) if scaler else None}


def restore(trainer, saved: dict) -> None:
    schedule, scaler, stop = plateau(trainer), loss_scaler(trainer), early_stopping()
    for holder, state in ((schedule, saved.get("plateau")), (scaler, saved.get("loss_scaler"))):
        if holder is not None and state:
            for key, value in state.items():
                setattr(holder, key, value)
    for key in EARLY_STOP_KEYS:  # absent before the first validation: absent again
        if hasattr(stop, key):
            delattr(stop, key)
    for key, value in (saved.get("early_stop") or {}).items():
        setattr(stop, key, value)


def pending_epoch_end(extra_state: dict):
    """The epoch whose lr step the checkpoint was saved before (an epoch's last checkpoint: fairseq's
    iterator state then points at the next epoch's start), else None."""
    itr = extra_state.get("train_iterator") or {}
    if itr.get("version", 1) >= 2 and itr.get("iterations_in_epoch", 0) == 0 and itr.get("epoch", 1) > 1:
        return itr["epoch"] - 1
    return None


def replay_epoch_end(trainer, extra_state: dict):
    """Take the lr step the uninterrupted run took after this checkpoint; the epoch it was for, or None."""
    epoch = pending_epoch_end(extra_state)
    if epoch is not None:
        trainer.lr_step(epoch, extra_state.get("val_loss"))
    return epoch
