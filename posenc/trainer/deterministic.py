"""The trainer's deterministic GPU mode: ``runtime.deterministic=true``, which the harness passes as
``FLAG`` on the trainer's command line (and ``CUBLAS_WORKSPACE_CONFIG`` in its environment).

On a CPU torch's kernels give the same bits run after run already. On a GPU several do not (atomic
adds in the backward of embeddings and index ops, cuDNN's and cuBLAS's choice of algorithm and
workspace), so two runs of one cell, or a resumed and an uninterrupted one, part in the last bits
within updates. The mode asks for torch's deterministic algorithms (an op without one stops the
cell with torch's error, naming the op), cuDNN's deterministic algorithms without benchmarking,
and a fixed cuBLAS workspace (``CUBLAS_CONFIG``; read when cuBLAS starts, so set before CUDA is used).

Nothing here imports torch at module level: the harness reads ``FLAG`` and ``CUBLAS_*`` from here.
"""

import os

FLAG = "--posenc-deterministic"
CUBLAS_VARIABLE = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_CONFIG = ":4096:8"  # one of the two values torch's reproducibility notes allow


def split_flag(argv: list):
    """fairseq-train's own arguments and whether ``FLAG`` was among them."""
    argv = list(argv)
    return [a for a in argv if a != FLAG], FLAG in argv


def apply() -> None:
    """Switch this process to the deterministic mode (each training process calls it: spawned ranks too)."""
    import torch

    os.environ.setdefault(CUBLAS_VARIABLE, CUBLAS_CONFIG)  # the harness exports it; a hand-run trainer gets it here
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def enabled() -> bool:
    """Whether this process trains in the deterministic mode."""
    import torch

    return bool(torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
                and not torch.backends.cudnn.benchmark)
