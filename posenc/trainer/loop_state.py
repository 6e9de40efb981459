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
- The lr the loop compares with ``--stop-min-lr`` before each epoch: uninterrupted, the one its last
  epoch's lr step returned; a process resumed inside an epoch compares the lr it restored instead,
  which a schedule that sets the lr as an epoch begins (``fixed`` with ``--force-anneal``) has already
  lowered for that epoch. So a resume inside the epoch that first trains below the floor stopped at
  once, an epoch short. ``epoch_begins`` notes the lr the loop checked, the checkpoint keeps it, and
  ``check_as_uninterrupted`` lends it to the optimizer for the resumed loop's check, until the epoch
  begins and the optimizer has its own again (before any update).
"""

import torch
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler

PLATEAU_KEYS = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch", "_last_lr")
SCALER_KEYS = ("loss_scale", "_iter", "_last_overflow_iter", "_last_rescale_iter", "_overflows_since_rescale")
EARLY_STOP_KEYS = ("best", "num_runs")
# checked: the lr the loop compared with --stop-min-lr before the epoch now training; own: the
# optimizer's lr while a resumed process lends it the checked one (until the epoch begins).
_EPOCH = {"checked": None, "own": None}


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
            "loss_scaler": _attributes(scaler, SCALER_KEYS) if scaler else None, "epoch_checked_lr": _EPOCH["checked"]}


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


def epoch_begins(trainer) -> None:
    """As an epoch's training begins (``posenc.trainer.train``, before fairseq's ``begin_epoch``): note
    the lr the loop checked, and give the optimizer back its own lr if a resume had lent it that one."""
    _EPOCH["checked"] = trainer.get_lr()
    if _EPOCH["own"] is not None:
        trainer.optimizer.set_lr(_EPOCH["own"])
        _EPOCH["own"] = None


def check_as_uninterrupted(trainer, saved: dict, extra_state: dict) -> None:
    """After fairseq restored a checkpoint saved inside an epoch (its last step there: ``lr_step``), with
    ``saved`` its resume state: the loop next reads ``trainer.get_lr()`` for its ``--stop-min-lr``
    check; let it read the lr the uninterrupted loop checked before this epoch."""
    itr = extra_state.get("train_iterator") or {}
    checked = saved.get("epoch_checked_lr")
    if checked is None or itr.get("iterations_in_epoch", 0) == 0 or checked == trainer.get_lr():
        return
    _EPOCH["own"] = trainer.get_lr()
    trainer.optimizer.set_lr(checked)
