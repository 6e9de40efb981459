"""Exact resume: a cell resumed from a checkpoint trains on, bit for bit, as if it had never stopped.

fairseq-fixed 0.12.3.1 (pinned in pyproject.toml) resumes close to that, not exactly: it builds a
training epoch's batches under ``numpy_seed(seed + epoch)`` for the epoch its iterator is created
for (``FairseqTask.get_batch_iterator``). An uninterrupted run creates the iterator once, for epoch
1, and reshuffles those batches every epoch (``EpochBatchIterator.ordered_batches``, seeded
``seed + epoch``); a process resumed in epoch 2 or later builds other batches (other sentences
side by side). Its loop also carries state the checkpoint lacks (``posenc.trainer.loop_state``: the
plateau schedule's counters and the lr step of an epoch's end, early stopping's counter, fp16's
loss scaler). Everything else a cell draws from is restored already or reseeded: the model,
optimizer, schedule and iterator position (fairseq's checkpoint), the torch generators (fairseq
reseeds them with ``seed + num_updates`` before every update), a kind's own shift generator (the
model's state dict: ``posenc.encodings.shifted``). numpy's and Python's global generators are
saved too, so that whatever draws from them (a user's kind) draws on as it would have.

Three methods of fairseq's ``Trainer`` and fairseq's ``checkpoint_utils.load_checkpoint`` are wrapped,
here alone, by ``install()`` in the trainer's process (``posenc.trainer.train``);
``tests/test_exact_resume.py`` fails loudly if they move:

- ``get_train_iterator``: the batches of epoch 1 whatever epoch the iterator is created for, unless
  fairseq rebuilds them every epoch anyway (sharded data, a disabled iterator cache): then the
  uninterrupted run has the epoch's own too;
- ``state_dict``: adds ``RESUME_KEY`` to the checkpoint's ``extra_state``: the generators' states,
  the loop's state and how this process trains (``posenc.trainer.exactness.process_state``);
- ``load_checkpoint``: restores them, replays a pending epoch-end lr step, and prints
  ``EXACT_RESUME_MARK``, or ``INEXACT_RESUME_MARK`` with the reasons
  (``posenc.trainer.exactness``), which the harness reads from the train log into the record's
  ``resume_exact`` and ``resume_inexact_reason``. A checkpoint where training had ended is noted
  (``finished``): the trainer then trains no further (``posenc.trainer.train``);
- ``checkpoint_utils.load_checkpoint`` (which ends a restore with an lr step): then the loop's
  ``--stop-min-lr`` check reads the lr the uninterrupted loop checked (``loop_state.check_as_uninterrupted``).
"""

import random

import numpy as np
import torch
from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from posenc.trainer import exactness, loop_state
from posenc.trainer.stop import EXACT_RESUME_MARK, INEXACT_RESUME_MARK, RESUME_VERSION

RESUME_KEY = "posenc_resume"
_STOCK = {}
_RESUMED = {"finished": "", "saved": None}  # what had ended the training at the checkpoint this process
# resumed from, and that checkpoint's resume state (None: none restored)


def install() -> None:
    """Wrap the three methods (once per process; spawned ranks call it too)."""
    if _STOCK:
        return
    for name, wrapper in (("get_train_iterator", get_train_iterator), ("state_dict", state_dict),
                          ("load_checkpoint", load_checkpoint)):
        _STOCK[name] = getattr(Trainer, name)
        setattr(Trainer, name, wrapper)
    _STOCK["restore"] = checkpoint_utils.load_checkpoint
    checkpoint_utils.load_checkpoint = restore


def rebuilds_batches_each_epoch(trainer) -> bool:
    """Whether fairseq builds a new iterator (new batches) at every epoch's start even uninterrupted."""
    dataset = trainer.cfg.dataset
    return bool(trainer.task.has_sharded_data(dataset.train_subset) or dataset.update_epoch_batch_itr
                or getattr(trainer.task.cfg, "rebuild_batches", False))


def get_train_iterator(self, epoch, combine=True, load_dataset=True, data_selector=None, shard_batch_itr=True,
                       disable_iterator_cache=False):
    """fairseq's, built for epoch 1 as the uninterrupted run built it; the checkpoint's iterator
    state then sets the epoch and the position in it (the reshuffle is seeded by the epoch)."""
    first = epoch if disable_iterator_cache or rebuilds_batches_each_epoch(self) else 1
    return _STOCK["get_train_iterator"](self, first, combine, load_dataset, data_selector, shard_batch_itr,
                                        disable_iterator_cache)


def random_states() -> dict:
    """Every global generator's state, in types a checkpoint loads without pickled numpy objects."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {"version": RESUME_VERSION, "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
            "python": [version, list(internal), gauss]}


def restore_random_states(saved: dict) -> None:
    torch.set_rng_state(saved["torch"])
    if saved["cuda"] and torch.cuda.is_available() and len(saved["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(saved["cuda"])
    kind, keys, pos, has_gauss, cached = saved["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = saved["python"]
    random.setstate((version, tuple(internal), gauss))


def state_dict(self):
    state = _STOCK["state_dict"](self)
    state["extra_state"][RESUME_KEY] = {**random_states(), **loop_state.capture(self), **exactness.process_state(self)}
    return state


def load_checkpoint(self, filename, *args, **kwargs):
    """fairseq's, then the generators' and the loop's states, and a line that says whether this
    resume is exact."""
    extra_state = _STOCK["load_checkpoint"](self, filename, *args, **kwargs)
    if extra_state is None:  # no checkpoint: a fresh start
        return extra_state
    saved = extra_state.get(RESUME_KEY)
    reasons = exactness.inexact_reasons(self, saved)
    if saved is not None and saved.get("version", 0) <= RESUME_VERSION:  # (an older version's: what it saved)
        restore_random_states(saved)
        loop_state.restore(self, saved)
        _RESUMED["saved"] = saved
    loop_state.replay_epoch_end(self, extra_state)  # fairseq saved what it needs for every checkpoint
    updates = self.get_num_updates()
    if reasons:
        print(f"{INEXACT_RESUME_MARK} {updates} ({'; '.join(reasons)})", flush=True)
    else:
        print(f"{EXACT_RESUME_MARK} {updates}", flush=True)
    _RESUMED["finished"] = exactness.finished_reason(self)
    return extra_state


def restore(cfg, trainer, **passthrough_args):
    """fairseq's restore of the checkpoint and its iterator (``fairseq_cli.train.main`` calls it once),
    then the lr for the loop's first ``--stop-min-lr`` check."""
    extra_state, epoch_itr = _STOCK["restore"](cfg, trainer, **passthrough_args)
    if extra_state is not None and _RESUMED["saved"] is not None:
        loop_state.check_as_uninterrupted(trainer, _RESUMED["saved"], extra_state)
    _RESUMED["saved"] = None
    return extra_state, epoch_itr


def finished() -> str:
    """What had ended the training at the checkpoint this process resumed from ("" if nothing did),
    once: the first epoch's start asks."""
    reason, _RESUMED["finished"] = _RESUMED["finished"], ""
    return reason
