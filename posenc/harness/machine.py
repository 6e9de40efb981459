"""The machine cells run on, read without importing torch in the harness's own process: the CPU's
model, the GPUs ``nvidia-smi`` lists, and each visible GPU's free memory (asked of torch.cuda in a
child, as ``config.precision`` counts CUDA devices). Provenance records the first two; the launcher
plans how many cells share a GPU with the third."""

import os
import platform
import re
import shutil
import subprocess
import sys

_SMI_GPU = re.compile(r"^GPU \d+: (.*?)(?: \(UUID: [^)]*\))?\s*$")


def cpu_model() -> str:
    """``AMD EPYC 9654 96-Core Processor``: /proc/cpuinfo's model name where Linux has one, else
    what the platform module says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def smi_lines() -> list:
    """``nvidia-smi -L``'s ``GPU i: NAME (UUID: ...)`` lines; none without nvidia-smi or a driver."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.splitlines() if line.startswith("GPU ")]


def gpu_names(lines=None) -> list:
    """The GPUs of the machine by name, as ``nvidia-smi -L`` lists them (all of them, whatever
    ``CUDA_VISIBLE_DEVICES`` shows a cell)."""
    return [m.group(1) for m in (_SMI_GPU.match(line) for line in (smi_lines() if lines is None else lines)) if m]


def describe() -> dict:
    """What provenance keeps of the machine beside the versions; never part of a cell's config hash."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "gpus": gpu_names()}


_FREE_MEMORY = ("import torch\n"
                "if torch.cuda.is_available():\n"
                "    for i in range(torch.cuda.device_count()):\n"
                "        free, total = torch.cuda.mem_get_info(i)\n"
                "        print(free / 2**30, total / 2**30)\n")


def gpu_memory_gib(env: dict = None) -> list:
    """``[(free, total), ...]`` in GiB for each GPU torch sees in a child with ``env``
    (``torch.cuda.mem_get_info``); [] where it sees none or cannot tell."""
    try:
        proc = subprocess.run([sys.executable, "-c", _FREE_MEMORY], capture_output=True, text=True,
                              env=env, timeout=300)
        return [tuple(float(x) for x in line.split()) for line in proc.stdout.splitlines() if line.strip()]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []
