"""A CUDA torch's fork hazard, faked for the suite's children (this folder first on PYTHONPATH, with
``POSENC_FAKE_CUDA=1``): once torch is imported, its CUDA queries behave as a CUDA build's do on a node
where it matters (tests/test_warm_cuda_fork.py).

- ``torch.cuda.device_count()`` asks the runtime, and so marks the process, where NVML cannot count:
  ``CUDA_VISIBLE_DEVICES=MIG-...`` or ``POSENC_FAKE_NO_NVML=1`` (a node without libnvidia-ml.so.1);
  ``CUDA_VISIBLE_DEVICES=""`` counts 0 from the variable alone, as torch does, and marks nothing.
- ``torch.cuda.is_available()`` asks the runtime always (``cudaGetDeviceCount``; unless
  ``PYTORCH_NVML_BASED_CUDA_CHECK=1``), so it marks the process.
- ``POSENC_FAKE_CUDA_AT_IMPORT=1``: the process is marked as soon as torch is imported (something that
  touched CUDA anyway).
- In a process forked from a marked one, the first of these calls (or ``torch.cuda._lazy_init``)
  raises torch's ``RuntimeError: Cannot re-initialize CUDA in forked subprocess. ...``, and
  ``torch.cuda._is_in_bad_fork()`` is true. A process started by exec is never marked.

The counts returned are the CPU build's (0), so the machine still trains on its CPU.
"""

import importlib.abc
import importlib.machinery
import os
import sys

MESSAGE = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
           "you must use the 'spawn' start method")
_marked = []  # the pid of the process CUDA marked; a forked child inherits it


def _in_bad_fork() -> bool:
    return bool(_marked) and _marked[0] != os.getpid()


def _mark() -> None:
    if _in_bad_fork():
        raise RuntimeError(MESSAGE)
    if not _marked:
        _marked.append(os.getpid())


def _nvml_cannot_count() -> bool:
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    if devices == "":
        return False
    return (devices or "").startswith("MIG-") or os.environ.get("POSENC_FAKE_NO_NVML") == "1"


def _patch(torch) -> None:
    cuda = torch.cuda
    count, available, lazy_init = cuda.device_count, cuda.is_available, cuda._lazy_init

    def device_count():
        if _in_bad_fork() or _nvml_cannot_count():
            _mark()
        return count()

    def is_available():
        if _in_bad_fork() or os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1" or _nvml_cannot_count():
            _mark()
        return available()

    def _lazy():
        if _in_bad_fork():
            raise RuntimeError(MESSAGE)
        return lazy_init()

    cuda.device_count, cuda.is_available, cuda._lazy_init = device_count, is_available, _lazy
    cuda._is_in_bad_fork = _in_bad_fork
    if os.environ.get("POSENC_FAKE_CUDA_AT_IMPORT") == "1":
        _mark()


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Patches torch once its import has run (its own import asks CUDA nothing)."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("POSENC_FAKE_CUDA") == "1":
    sys.meta_path.insert(0, _AfterTorch())
