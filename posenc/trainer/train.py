"""``python -m posenc.trainer.train ARGS``: fairseq-train, except that ``--bf16``
trains in bfloat16 on the GPU instead of asking for a TPU, and that SIGTERM saves a checkpoint at
once and stops (``posenc.trainer.stop``) instead of killing the process.

fairseq's option post-processing turns every ``--bf16`` into ``--tpu`` (``fairseq/options.py``;
fairseq issue #4696), so stock ``fairseq-train --bf16`` on a CUDA machine looks for torch_xla and
stops. The trainer and FP16Optimizer already handle bf16 on any device (bf16 weights, fp32 master
copies, no loss scaling); only that coupling is in the way. This entry parses the arguments with
fairseq's own parser, keeps ``--tpu`` only when it was asked for, and runs fairseq-train's
``main`` through fairseq's own launcher, as ``fairseq_cli.train.cli_main`` does. It lives outside the plugin
package so that nothing imports fairseq before ``fairseq_cli.train`` sets up fairseq's logging. The harness uses
it for every cell: a SLURM time limit, a preemption or an ``scancel`` then loses no training.

Save and stop: fairseq's training loop calls ``fairseq_cli.train.validate_and_save`` after every
update; this entry wraps that function (fairseq-fixed 0.12.3.1, pinned in pyproject.toml; the test
``tests/test_slurm_world.py`` fails loudly if the function moves). Once a stop was asked for, the
wrapper saves ``checkpoint_last.pt`` with fairseq's own ``checkpoint_utils.save_checkpoint`` (or,
at an update where fairseq validates and saves anyway, lets it do so: the resumed run's best
checkpoint is then the uninterrupted one's) and tells the loop to stop; with several GPUs the ranks
agree (an all-reduce of the request) so that all stop after the same update.

Exact resume: ``posenc.trainer.exact_resume`` makes a resumed run train on as the uninterrupted one would;
a run resumed from the checkpoint where training had ended (``max_update``, the time cap, early
stopping: killed after that save) trains no further and says so (``FINISHED_MARK``): fairseq's loop
would train one more update before it checks. ``--posenc-deterministic`` (``runtime.deterministic``)
switches each training process to the deterministic GPU mode (``posenc.trainer.deterministic``).
"""

import os  # isort: skip
import signal  # isort: skip
import sys  # isort: skip

from posenc.trainer.decode import split_argv  # isort: skip
from posenc.trainer.stop import FINISHED_MARK, IGNORED, SAVE_AND_STOP, STOPPED_EXIT, STOPPED_MARK  # isort: skip

_STOP = {"asked": False, "saved_at": None}


def _ask(signum, frame) -> None:
    _STOP["asked"] = True


def install_handlers() -> None:
    signal.signal(SAVE_AND_STOP, _ask)
    for signum in IGNORED:
        signal.signal(signum, signal.SIG_IGN)


if __name__ == "__main__":  # the trainer's own process (not a test importing it), before fairseq's imports:
    install_handlers()       # a stop asked for during those seconds is kept and acted on at the first update

# fairseq_cli.train next: importing it sets up fairseq's log format (``| INFO | valid | {...}``,
# on stdout) before anything else imports fairseq, exactly as in the stock fairseq-train script.
from fairseq_cli import train  # noqa: E402  isort: skip

import torch  # noqa: E402
from fairseq import checkpoint_utils, options  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf  # noqa: E402
from fairseq.distributed import utils as distributed_utils  # noqa: E402

from posenc.trainer import deterministic, exact_resume, loop_state  # noqa: E402

_STOCK_VALIDATE_AND_SAVE = train.validate_and_save
_STOCK_TRAIN = train.train


def parse(argv):
    """fairseq-train's configuration of ``argv``, with ``--tpu`` only where it was asked for."""
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=list(argv))
    if args.bf16 and "--tpu" not in argv:
        args.tpu = False
    return convert_namespace_to_omegaconf(args)


def stop_agreed(trainer) -> bool:
    """Whether any rank was asked to stop (every rank takes part, after every update)."""
    if trainer.data_parallel_world_size <= 1:
        return _STOP["asked"]
    flag = torch.tensor([1.0 if _STOP["asked"] else 0.0], device=trainer.device)
    distributed_utils.all_reduce(flag, group=trainer.data_parallel_process_group, op="max")
    return bool(flag.item() > 0)


def saves_here(cfg, trainer, epoch_itr, end_of_epoch) -> bool:
    """Whether fairseq validates and saves after this update anyway (fairseq_cli.train's
    ``do_save``: an epoch's end at ``--save-interval``, ``--save-interval-updates``, ``--max-update``,
    ``--stop-time-hours``); the same on every rank."""
    updates, checkpoint, limits = trainer.get_num_updates(), cfg.checkpoint, cfg.optimization
    interval = checkpoint.save_interval_updates
    return ((end_of_epoch and epoch_itr.epoch % checkpoint.save_interval == 0)
            or (interval > 0 and updates % interval == 0 and updates >= cfg.dataset.validate_after_updates)
            or updates >= (limits.max_update or float("inf"))
            or 0 < limits.stop_time_hours < trainer.cumulative_training_time() / 3600)


def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
    """fairseq's own, unless a stop was asked for: then save now and stop."""
    if not stop_agreed(trainer):
        return _STOCK_VALIDATE_AND_SAVE(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
    if saves_here(cfg, trainer, epoch_itr, end_of_epoch):  # its validation and save first: a resumed run never
        # does them again, and the best checkpoint is the uninterrupted run's
        valid_losses, _ = _STOCK_VALIDATE_AND_SAVE(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
    else:
        valid_losses = [None]
        checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, None)
    _STOP["saved_at"] = trainer.get_num_updates()
    return valid_losses, True


def train_epoch(cfg, trainer, task, epoch_itr):
    """fairseq's epoch, unless the checkpoint resumed from is where training had ended: then none."""
    reason = exact_resume.finished()
    if reason:
        print(f"{FINISHED_MARK} {reason} (update {trainer.get_num_updates()})", flush=True)
        return [None], True
    loop_state.epoch_begins(trainer)
    return _STOCK_TRAIN(cfg, trainer, task, epoch_itr)


def train_main(cfg, deterministic_mode=False, **kwargs) -> None:
    """fairseq-train's ``main`` in each training process (spawned ranks install the handlers and
    switch to the deterministic mode too)."""
    install_handlers()
    if deterministic_mode:
        deterministic.apply()
    exact_resume.install()
    train.main(cfg, **kwargs)
    if _STOP["saved_at"] is not None:
        print(f"{STOPPED_MARK} {_STOP['saved_at']}", flush=True)


def main(argv=None) -> None:
    train.validate_and_save, train.train = validate_and_save, train_epoch
    argv, decode_plan = split_argv(sys.argv[1:] if argv is None else argv)  # posenc.trainer.decode
    argv, deterministic_mode = deterministic.split_flag(argv)
    if deterministic_mode:  # before CUDA starts, in this process and the ranks it spawns
        os.environ.setdefault(deterministic.CUBLAS_VARIABLE, deterministic.CUBLAS_CONFIG)
    distributed_utils.call_main(parse(argv), train_main, deterministic_mode=deterministic_mode)
    if _STOP["asked"]:
        sys.exit(STOPPED_EXIT)
    if decode_plan:  # the start is paid once: the test split(s) decoded here (posenc.trainer.fairseq_decode)
        from posenc.trainer.fairseq_decode import decode
        decode(decode_plan)


if __name__ == "__main__":
    main()
