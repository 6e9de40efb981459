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
_MIG_UUID = re.compile(r"\(UUID: (MIG-[^)\s]+)\)")


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


def smi(*args) -> str:
    """What ``nvidia-smi ARGS`` prints; "" without nvidia-smi or a driver."""
    path = shutil.which("nvidia-smi")
    if not path:
        return ""
    try:
        return subprocess.run([path, *args], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def smi_lines(out: str = None) -> list:
    """``nvidia-smi -L``'s ``GPU i: NAME (UUID: ...)`` lines; none without nvidia-smi or a driver."""
    return [line for line in (smi("-L") if out is None else out).splitlines() if line.startswith("GPU ")]


def cuda_devices(out: str = None) -> list:
    """The devices a cell may be given, in ``CUDA_VISIBLE_DEVICES``'s terms, from ``nvidia-smi -L``:
    each GPU's index (nvidia-smi's PCI bus order: the cells get ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), or,
    for a GPU split into MIG instances (the indented ``MIG 1g.10gb Device 0: (UUID: MIG-...)`` lines
    under it), each instance's UUID: CUDA sees a MIG GPU only through its instances."""
    devices, gpu, migs = [], None, []
    for line in (smi("-L") if out is None else out).splitlines() + ["GPU end"]:
        if line.startswith("GPU "):
            if gpu is not None:
                devices += migs or [gpu]
            gpu, migs = line[4:].split(":", 1)[0].strip(), []
        elif line.strip().startswith("MIG ") and _MIG_UUID.search(line):
            migs.append(_MIG_UUID.search(line).group(1))
    return devices


def exclusive_gpus(out: str = None) -> list:
    """Indices of the GPUs in an exclusive compute mode (``nvidia-smi --query-gpu=index,compute_mode``):
    such a GPU takes one process, so one cell."""
    text = smi("--query-gpu=index,compute_mode", "--format=csv,noheader") if out is None else out
    rows = [[part.strip() for part in line.split(",")] for line in text.splitlines() if "," in line]
    return [row[0] for row in rows if row[1].lower().startswith("exclusive")]


_DEVICE_COUNT = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
# The environment a child's CUDA device count depends on: the same answer for the same values, so it is
# asked once per process for each (precision=fp16's check before every cell; the slots where no nvidia-smi).
COUNT_KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH",
              "VIRTUAL_ENV", "NVIDIA_VISIBLE_DEVICES")
_counted: dict = {}


def cuda_device_count(env: dict = None) -> int:
    """CUDA devices torch sees in a child with ``env`` (0 where it sees none or cannot tell). A child,
    because the harness's own process never imports torch (nor initialises CUDA before a fork); the
    answer is kept in this process for the environment's ``COUNT_KEYS``, as importing torch takes seconds."""
    env = dict(os.environ) if env is None else env
    key = (sys.executable, *(env.get(k) for k in COUNT_KEYS))
    if key not in _counted:
        try:
            proc = subprocess.run([sys.executable, "-c", _DEVICE_COUNT], capture_output=True, text=True,
                                  env=env, timeout=300)
            _counted[key] = int(proc.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            _counted[key] = 0
    return _counted[key]


def gpu_identity(visible: str = None, out: str = None) -> dict:
    """Which GPU(s) a cell ran on, for its record: ``{"gpu_index": "1", "gpu_uuid": "GPU-..."}`` from its
    ``CUDA_VISIBLE_DEVICES`` (indices in nvidia-smi's order, or GPU/MIG UUIDs) and ``nvidia-smi -L``;
    {} where it cannot tell (several GPUs and no ``CUDA_VISIBLE_DEVICES``: CUDA's own order)."""
    text = smi("-L") if out is None else out
    uuids = {}  # index -> UUID, and each MIG UUID -> its GPU's index
    gpu = None
    for line in text.splitlines():
        found = re.search(r"\(UUID: ([^)\s]+)\)", line)
        if line.startswith("GPU "):
            gpu = line[4:].split(":", 1)[0].strip()
            uuids[gpu] = found.group(1) if found else ""
        elif found and gpu is not None:
            uuids[found.group(1)] = gpu
    if visible is None:
        if len([k for k in uuids if k.isdigit()]) != 1:
            return {}
        visible = "0"
    ids = [d.strip() for d in visible.split(",") if d.strip()]
    index = [d if d.isdigit() else uuids.get(d) or next((i for i, u in uuids.items() if u == d), "?") for d in ids]
    uuid = [uuids.get(d, "") if d.isdigit() else d for d in ids]
    return {"gpu_index": ",".join(index), "gpu_uuid": ",".join(uuid) or None} if ids else {}


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
