"""GPU settings of a cell: numeric precision (``precision=fp32|fp16|bf16``) and GPUs per cell
(``gpus=N``), checked before anything runs: on their own when the cell is resolved
(``check_gpu_settings``), and against the machine once a finished cell is known not to be kept
(``check_hardware``). The fairseq flags they become, and why, are ``posenc.harness.config.commands``'s.
"""

from posenc.harness import machine
from posenc.harness.errors import ConfigError

PRECISIONS = ("fp32", "fp16", "bf16")


def check_gpu_settings(cfg) -> None:
    """``precision`` and ``gpus`` on their own; raise ConfigError naming the value and what is allowed."""
    if cfg.precision not in PRECISIONS:
        raise ConfigError(f"precision={cfg.precision!r} is not allowed; allowed: {', '.join(PRECISIONS)}")
    if not isinstance(cfg.gpus, int) or isinstance(cfg.gpus, bool) or cfg.gpus < 0:
        share = (f"; to share a GPU between cells, runtime.cells_per_gpu={round(1 / cfg.gpus)}"
                 if isinstance(cfg.gpus, float) and 0 < cfg.gpus < 1 else "")  # Ray's gpus=0.25
        raise ConfigError(f"gpus={cfg.gpus!r} is not allowed; allowed: 0 (CPU only) "
                          f"or a number of GPUs per cell (1, 2, ...){share}")
    if cfg.gpus == 0 and cfg.precision == "fp16":
        raise ConfigError("precision=fp16 with gpus=0 is not possible: fairseq's --fp16 needs a CUDA GPU; "
                          "allowed on the CPU: fp32, bf16")


def needs_cuda(cell) -> int:
    """How many CUDA devices the cell cannot run without (0: it runs anywhere)."""
    if cell.gpus > 1:
        return cell.gpus
    return 1 if cell.precision == "fp16" else 0


def cuda_device_count(env: dict) -> int:
    """CUDA devices torch sees in a child with this environment (``machine.cuda_device_count``: asked
    once per process and environment, and only when a cell needs CUDA)."""
    return machine.cuda_device_count(env)


def check_hardware(cell, env: dict) -> None:
    """Refuse, before any work, a cell (a ResolvedCell) that needs more CUDA devices than the machine shows."""
    needed = needs_cuda(cell)
    if not needed:
        return
    found = cuda_device_count(env)
    if found < needed:
        why = "fairseq's --fp16 needs a CUDA GPU" if cell.gpus <= 1 else f"gpus={cell.gpus} trains on {cell.gpus} GPUs"
        raise ConfigError(f"precision={cell.precision} gpus={cell.gpus} needs {needed} CUDA device(s); "
                          f"this machine shows {found} ({why}; on the CPU use precision=fp32 or bf16 with gpus=1 or 0)")
