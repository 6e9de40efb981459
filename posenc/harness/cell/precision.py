"""GPU settings of a cell: numeric precision (``precision=fp32|fp16|bf16``) and GPUs per cell
(``gpus=N``), as fairseq flags, checked before anything runs.

fairseq picks the device itself: a GPU where torch sees one, else the CPU. ``gpus`` is passed as
``--distributed-world-size`` always, because fairseq's default is *every* visible GPU, which would
make a cell's effective batch size (and so its result) depend on the machine it ran on.

With more than one GPU, fairseq would also infer its world size from the environment
(``fairseq.distributed.utils.infer_init_method``): inside a SLURM job with one task per node it takes
every GPU of the node, joblib cells sharing an allocation derive one port from ``SLURM_JOB_ID``, a
bare ``salloc`` shell crashes, and torchrun's variables set another world size. An explicit
``--distributed-init-method tcp://localhost:<free port>`` skips all of that inference: the cell
trains on the GPUs it asked for, on a port of its own. (One GPU or the CPU never infers anything.)
"""

import socket
import subprocess
import sys

from posenc.harness.errors import ConfigError

PRECISIONS = ("fp32", "fp16", "bf16")

# The stock trainer, except that --bf16 trains on the GPU instead of asking for a TPU and that SIGTERM saves
# a checkpoint at once and stops (see posenc/fairseq_train.py).
TRAINER = ("-m", "posenc.fairseq_train")


def check_gpu_settings(cfg) -> None:
    """``precision`` and ``gpus`` on their own; raise ConfigError naming the value and what is allowed."""
    if cfg.precision not in PRECISIONS:
        raise ConfigError(f"precision={cfg.precision!r} is not allowed; allowed: {', '.join(PRECISIONS)}")
    if not isinstance(cfg.gpus, int) or isinstance(cfg.gpus, bool) or cfg.gpus < 0:
        raise ConfigError(f"gpus={cfg.gpus!r} is not allowed; allowed: 0 (CPU only) "
                          "or a number of GPUs per cell (1, 2, ...)")
    if cfg.gpus == 0 and cfg.precision == "fp16":
        raise ConfigError("precision=fp16 with gpus=0 is not possible: fairseq's --fp16 needs a CUDA GPU; "
                          "allowed on the CPU: fp32, bf16")


def train_program() -> list:
    """The program part of the training command: fairseq-train's ``main``, through ``posenc.fairseq_train``."""
    return [sys.executable, *TRAINER]


def train_flags(cell) -> list:
    """Precision and device flags of fairseq-train (``cell``: anything with ``precision`` and ``gpus``,
    a resolved Cell or a composed config)."""
    precision = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}[cell.precision]
    return precision + device_flags(cell)


def free_port() -> int:
    """A TCP port no process on this machine listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def device_flags(cfg, port: int = None) -> list:
    """The number of devices fairseq trains on; ``gpus=0``: one CPU process even where GPUs exist
    (without the world size, fairseq would start one CPU process per visible GPU). Several GPUs
    get their own rendezvous (``port``, else a free one), whatever SLURM or torchrun variables say."""
    if cfg.gpus == 0:
        return ["--cpu", "--distributed-world-size", "1"]
    if cfg.gpus == 1:
        return ["--distributed-world-size", "1"]
    return ["--distributed-world-size", str(cfg.gpus),
            "--distributed-init-method", f"tcp://localhost:{port or free_port()}"]


def needs_cuda(cfg) -> int:
    """How many CUDA devices the cell cannot run without (0: it runs anywhere)."""
    if cfg.gpus > 1:
        return cfg.gpus
    return 1 if cfg.precision == "fp16" else 0


def cuda_device_count(env: dict) -> int:
    """CUDA devices torch sees in a child with this environment. A child, because the harness's
    parent process never imports torch; asked only when a cell needs CUDA (a second or two)."""
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        return int(proc.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return 0


def check_hardware(cfg, env: dict) -> None:
    """Refuse, before any work, a cell that needs more CUDA devices than the machine shows."""
    needed = needs_cuda(cfg)
    if not needed:
        return
    found = cuda_device_count(env)
    if found < needed:
        why = "fairseq's --fp16 needs a CUDA GPU" if cfg.gpus <= 1 else f"gpus={cfg.gpus} trains on {cfg.gpus} GPUs"
        raise ConfigError(f"precision={cfg.precision} gpus={cfg.gpus} needs {needed} CUDA device(s); "
                          f"this machine shows {found} ({why}; on the CPU use precision=fp32 or bf16 with gpus=1 or 0)")
