"""The environment of fairseq's child processes: the user's own, plus exactly the variables below.

Nothing that changes fairseq's speed or results is added unless the config asks for it
(``conf/runtime/``); ``commands.sh`` exports the same variables, so running it by hand is the
same run. Variables the harness always sets:

- ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``: fairseq's checkpoint loading predates torch's
  ``weights_only`` default; the harness only loads checkpoints under the cell's own directory.
- ``PYTHONUNBUFFERED=1``: fairseq's log lines reach the harness (progress, divergence checks)
  and ``train.log`` as they are printed, and are not lost when a step is killed.

Set only when the config asks: ``OMP_NUM_THREADS`` (``runtime.threads``),
``OMP_WAIT_POLICY`` (``runtime.omp_wait_policy``) and ``CUBLAS_WORKSPACE_CONFIG``
(``runtime.deterministic=true``: ``posenc.trainer.deterministic``). Cells that run side by side (a parallel
launcher) also get their share of the cores and GPUs of their own (``posenc.harness.launch.parallel``:
``OMP_NUM_THREADS``, ``CUDA_VISIBLE_DEVICES``).

(Python itself sets ``LC_CTYPE=C.UTF-8`` when started under the bare C locale (PEP 538), in
posenc-run as in fairseq's own process when run by hand; it changes nothing fairseq does.)
"""

import os
from collections.abc import Mapping

from posenc.harness.errors import ConfigError
from posenc.trainer.deterministic import CUBLAS_CONFIG, CUBLAS_VARIABLE

ALWAYS = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "PYTHONUNBUFFERED": "1"}
WAIT_POLICIES = ("PASSIVE", "ACTIVE")


def thread_count(threads):
    """``OMP_NUM_THREADS`` the config asks for (``runtime.threads``), or None to add nothing here:
    a cell that has the machine to itself then uses every core, as fairseq does by default (or the
    user's own ``OMP_NUM_THREADS``); cells side by side get their share from
    ``posenc.harness.launch.parallel``."""
    if threads is None:
        return None
    try:
        n = int(threads)
    except (TypeError, ValueError):
        n = 0
    if n < 1 or str(n) != str(threads).strip():
        raise ConfigError(f"runtime.threads={threads!r} is not allowed; allowed: null or a whole number >= 1")
    return n


AUTO = "auto"


def cells_per_gpu(value):
    """``runtime.cells_per_gpu``: ``auto`` (as many cells on each GPU as its free memory and the cores
    allow, ``posenc.harness.launch.sharing``) or a whole number >= 1 of cells that share each GPU.
    A count, where Ray writes a fraction (``{"gpu": 0.25}``): 3 cells on a GPU are exactly 3, and
    ``gpus=N`` keeps its one meaning, the data-parallel GPUs of one cell (which change its batch, name
    and hash; where a cell runs changes none of them)."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    n = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    if n is None or n < 1:
        raise ConfigError(f"runtime.cells_per_gpu={value!r} is not allowed; allowed: auto (as many as fit) or "
                          "a whole number >= 1 of cells that share each GPU")
    return n


def warm_trainer(value) -> bool:
    """``runtime.warm_trainer``: true (the trainer of each cell is forked by a warm trainer that has
    imported torch and fairseq once for its slot, ``posenc.harness.run.warm``) or false (a fresh
    ``python -m posenc.trainer.train`` per cell). Either trains the same cell byte for byte."""
    if isinstance(value, bool):
        return value
    raise ConfigError(f"runtime.warm_trainer={value!r} is not allowed; allowed: true (the trainer's start paid "
                      "once per slot) or false (a fresh trainer process per cell)")


def deterministic(value) -> bool:
    """``runtime.deterministic``: true (the trainer's deterministic GPU mode, ``posenc.trainer.deterministic``)
    or false (torch's defaults: GPU kernels that need not repeat their bits)."""
    if isinstance(value, bool):
        return value
    raise ConfigError(f"runtime.deterministic={value!r} is not allowed; allowed: true (deterministic GPU kernels: "
                      "a GPU cell repeats bit for bit, slower) or false (torch's defaults)")


def added_environment(runtime) -> dict:
    """The variables the harness sets for fairseq's children (and ``commands.sh`` exports), apart
    from what cells side by side get from ``posenc.harness.launch.parallel`` (a thread share, their GPUs)."""
    added = dict(ALWAYS)
    threads = thread_count(runtime.get("threads"))
    if threads:
        added["OMP_NUM_THREADS"] = str(threads)
    policy = runtime.get("omp_wait_policy")
    if policy is not None:
        if str(policy).upper() not in WAIT_POLICIES:
            raise ConfigError(f"runtime.omp_wait_policy={policy!r} is not allowed; "
                              f"allowed: null, {', '.join(WAIT_POLICIES)}")
        added["OMP_WAIT_POLICY"] = str(policy).upper()
    if deterministic(runtime.get("deterministic", False)):  # cuBLAS reads it when it starts
        added[CUBLAS_VARIABLE] = CUBLAS_CONFIG
    return added


# What posenc-run's environment was when it started, before any library ran.
STARTUP_ENV = dict(os.environ)
# Variables that libraries imported by posenc-run put into its own environment, and which are not
# the user's: joblib (imported when Hydra scans its launcher plugins) sets KMP_INIT_AT_FORK=FALSE.
# They reach fairseq only if the user's environment had them already.
LIBRARY_SIDE_EFFECTS = ("KMP_INIT_AT_FORK",)


def child_environment(added: Mapping, user_env: Mapping = None) -> dict:
    """The whole environment of a child: the user's, with the harness's variables on top."""
    base = os.environ if user_env is None else user_env
    own = {k: v for k, v in base.items() if k not in LIBRARY_SIDE_EFFECTS or k in STARTUP_ENV}
    return {**own, **added}
