"""CUDA and ``fork``: what the warm trainer (``posenc.trainer.warm``) and the harness's step runner
(``posenc.harness.run.step``) both need to know, in one place. Imports nothing but ``os``: the harness
reads it without torch.

torch marks a process once it asks the CUDA runtime anything (``cudaGetDeviceCount``: ``torch.cuda.
is_available()`` always, ``torch.cuda.device_count()`` where NVML cannot count, as on a MIG slice or a
node without ``libnvidia-ml.so.1``), and every process forked from a marked one fails at its first CUDA
call with ``BAD_FORK``. The warm trainer therefore imports torch and fairseq with no GPU visible
(``hide_gpus``): torch then counts 0 devices from ``CUDA_VISIBLE_DEVICES`` alone, without NVML or the
runtime, and each forked cell puts its own ``CUDA_VISIBLE_DEVICES`` back before anything touches CUDA.
"""

import os

BAD_FORK = "Cannot re-initialize CUDA in forked subprocess"


def hide_gpus() -> None:
    """No GPU visible to this process (the warm trainer's own, before its imports)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def bad_fork(lines) -> bool:
    """Whether a cell's output ``lines`` say it was forked from a process CUDA had marked."""
    return any(BAD_FORK in line for line in lines)
