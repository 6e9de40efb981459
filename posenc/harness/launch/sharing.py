"""How many cells of a sweep share each GPU (``runtime.cells_per_gpu``): decided once, as the sweep
starts, said in one line, and kept in ``<sweep>/.gpu-slots/share.json`` for its cells to read, so that
every cell of one launch takes the same share.

``auto`` packs as many cells on a GPU as fit: the cell's training memory (``posenc.trainer.memory``'s
estimate, asked of a child as the harness never imports torch, plus ``CONTEXT_GIB`` for the CUDA
context and the allocator's slack of each process) into ``FREE_FRACTION`` of the free memory of the
GPU that has least (``torch.cuda.mem_get_info``, ``posenc.harness.machine``), at most the cores
divided among the GPUs (each cell needs a core), and at most the launcher's workers per GPU.
Sharing applies where cells run side by side on this machine's GPUs: ``hydra/launcher=joblib``.
"""

import json
import math
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic
from posenc.cells.record import is_failed
from posenc.corpora.databin import read_databin
from posenc.corpora.errors import CorpusError
from posenc.harness import machine
from posenc.harness.config.commands import flags
from posenc.harness.config.environment import AUTO, cells_per_gpu
from posenc.harness.errors import ConfigError
from posenc.harness.launch.parallel import (
    JOBLIB,
    SLOTS_DIR,
    cell_resources,
    concurrent_cells,
    machine_cores,
    task_cells,
    visible_gpus,
)
from posenc.harness.run.failures import gpu_out_of_memory

SHARE_FILE = "share.json"
# Per process: the CUDA context, cuDNN/cuBLAS workspaces, the caching allocator's reserve over what it
# hands out (the H200's measured peaks, 0.66 GiB, are torch's allocated bytes and leave these out). Not
# measured by this project yet (make offline-gpu-check's packed sweep samples nvidia-smi's memory.used
# to measure it); a cell that finds its GPU full anyway runs again alone (run_sharing).
CONTEXT_GIB = 1.0
FREE_FRACTION = 0.9    # of a GPU's free memory: room for what the estimate leaves out
DEFAULT_VOCAB = 40000  # a corpus that states no subword size: WMT's joined dictionary


@dataclass(frozen=True)
class Share:
    cells_per_gpu: int
    why: str


def fit_share(need_gib: float, free_gib: list, cores: int, gpus: int, workers: int) -> Share:
    """``auto``: as many cells per GPU as memory, cores and the launcher's workers all allow (at least 1)."""
    fit = int(min(free_gib) * FREE_FRACTION // need_gib)
    by_cores = max(1, cores // gpus)
    by_workers = max(1, math.ceil(workers / gpus))
    n = max(1, min(fit, by_cores, by_workers))
    limit = min((fit, "memory"), (by_cores, "the cores"), (by_workers, "the launcher's workers"))[1]
    return Share(n, f"auto, limited by {limit}: a cell needs about {need_gib:.1f} GiB (estimate + "
                    f"{CONTEXT_GIB:g} GiB CUDA context), {fit} fit in {FREE_FRACTION:.0%} of the "
                    f"{min(free_gib):.1f} GiB free on the fullest GPU; {cores} cores allow {by_cores} per GPU; "
                    f"{workers} cells run at once on {gpus} GPU(s)")


def vocabulary(data) -> int:
    """The vocabulary a cell's embeddings and output layer have: a data-bin's own dictionaries
    (``data=binarized``), else the corpus's subword size, else ``DEFAULT_VOCAB``."""
    if OmegaConf.select(data, "recipe", default=None) == "binarized":
        try:
            return read_databin(*(OmegaConf.select(data, key) for key in ("dir", "src", "tgt"))).vocabulary()
        except (CorpusError, OSError) as err:
            raise ConfigError(f"the memory estimate cannot read the data-bin: {err}") from None
    return int(OmegaConf.select(data, "subword_size", default=None) or DEFAULT_VOCAB)


def training_need_gib(cfg) -> float:
    """GiB one cell of ``cfg`` needs on a GPU: ``posenc.trainer.memory``'s estimate (in a child) + ``CONTEXT_GIB``.
    The vocabulary is ``vocabulary``'s: a subword size is about the dictionary's size at WMT's scale,
    above it for a small corpus such as the synthetic one."""
    model_args = OmegaConf.to_container(cfg.model.args, resolve=True) or {}
    vocab = vocabulary(cfg.data)
    argv = [sys.executable, "-m", "posenc.trainer.memory", "--json", "--arch", str(cfg.model.arch),
            "--vocab", str(vocab),
            "--max-tokens", str(cfg.budget.max_tokens),
            "--optimizer", str(OmegaConf.select(cfg, "optim.args.optimizer", default="adam")), *flags(model_args)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    try:
        parts = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ConfigError(f"the memory estimate of model.arch={cfg.model.arch} failed "
                          f"({(proc.stderr.strip().splitlines() or ['no output'])[-1][:200]}): one cell a GPU; "
                          "runtime.cells_per_gpu=N sets it") from None
    half = cfg.precision in ("fp16", "bf16")
    return parts["training_gib_half" if half else "training_gib_fp32"] + CONTEXT_GIB


def exclusive_share(gpus: list, exclusive: list):
    """One cell a GPU where one of ``gpus`` is in an exclusive compute mode (``machine.exclusive_gpus``'s
    indices; a second process there fails with "busy or unavailable"), else None. Ids that are not
    indices (MIG or GPU UUIDs) are matched by any exclusive GPU of the machine."""
    hit = [g for g in gpus if g in exclusive] if all(g.isdigit() for g in gpus) else list(exclusive)
    if not hit:
        return None
    return Share(1, f"GPU {', '.join(hit)} in Exclusive_Process compute mode (nvidia-smi): one process each")


def decide(cfg, launcher, memory=None, need=None, cores: int = None, environ=None, exclusive=None):
    """The sweep's ``Share``, or None where its cells do not share GPUs (another launcher, one cell at
    a time, ``gpus=0``, no GPU). A bad ``runtime.cells_per_gpu`` raises ConfigError. ``memory`` and
    ``need`` are the two questions ``auto`` asks of torch, in children, and ``exclusive`` the one of
    nvidia-smi (tests answer them)."""
    asked = cells_per_gpu(OmegaConf.select(cfg, "runtime.cells_per_gpu", default=AUTO))
    gpus = visible_gpus(environ)
    workers = concurrent_cells(launcher, 1 << 30, cores)
    if str(launcher.get("_target_", "")) != JOBLIB or cfg.gpus == 0 or not gpus or workers <= 1:
        return None
    one_each = exclusive_share(gpus, (exclusive or machine.exclusive_gpus)())
    if one_each:
        return one_each
    if asked != AUTO:
        return Share(asked, f"runtime.cells_per_gpu={asked}")
    free = [f for f, _ in (memory or machine.gpu_memory_gib)()][:len(gpus)]
    if not free:
        return Share(1, "auto: torch sees no CUDA device to measure")
    try:
        need_gib = (need or training_need_gib)(cfg)
    except ConfigError as err:  # no estimate: one cell a GPU, as before sharing, and the line says why
        return Share(1, f"auto: {err}")
    return fit_share(need_gib, free, cores or machine_cores(), len(gpus), workers)


def share_file(sweep_dir) -> Path:
    return Path(sweep_dir) / SLOTS_DIR / SHARE_FILE


def cells_on_each_gpu(cell, sweep_dir, launcher=None) -> int:
    """How many cells take each GPU at once: in a SLURM array task of several cells, as many as the
    task's cells need of its GPUs; else the sweep's decision where it made one, else the cell's own
    ``runtime.cells_per_gpu`` when a number, else 1."""
    in_task = task_cells(launcher)
    if in_task > 1:
        return max(1, math.ceil(in_task * max(1, cell.gpus) / max(1, len(visible_gpus()))))
    try:
        return max(1, int(json.loads(share_file(sweep_dir).read_text(encoding="utf-8"))["cells_per_gpu"]))
    except (OSError, ValueError, KeyError, TypeError):
        return cell.cells_per_gpu if isinstance(cell.cells_per_gpu, int) else 1


def run_sharing(cell, launcher, cells_in_sweep: int, sweep_dir, run, say=None):
    """``run(env, shared)`` with the cell's resources (``parallel.cell_resources``, its share of a GPU);
    a cell that ran out of GPU memory while it shared its GPU (joblib cells, or the cells of a SLURM
    array task) is run again, alone on its GPU(s), once the cells beside it finished: from its last
    checkpoint, or from the start where fairseq dropped a batch (``run.lifecycle.train``)."""
    per_gpu = cells_on_each_gpu(cell, sweep_dir, launcher)
    with cell_resources(cell, launcher, cells_in_sweep, sweep_dir, say, per_gpu) as env:
        shared = per_gpu > 1 and "CUDA_VISIBLE_DEVICES" in env
        ran = run(env, shared)
    record = getattr(ran, "record", None)
    if not (shared and record is not None and is_failed(record) and gpu_out_of_memory(record.error)):
        return ran
    if say:
        say(f"out of GPU memory beside {per_gpu - 1} other cell(s): running it again alone on its GPU")
    with cell_resources(cell, launcher, cells_in_sweep, sweep_dir, say, per_gpu, alone=True) as env:
        return run(env, False)


class GpuSharing(Callback):
    """At a sweep's start (Hydra's callback, in ``posenc-run``'s own process, before any cell runs):
    refuse a bad ``runtime.cells_per_gpu`` in one line, and decide and say how many cells share each GPU."""

    def on_multirun_start(self, config, **kwargs) -> None:
        path = share_file(config.hydra.sweep.dir)
        try:
            share = decide(config, config.hydra.launcher)
        except ConfigError as err:
            print(f"posenc-run: error: {err}", file=sys.stderr)
            sys.exit(2)
        if share is None:
            path.unlink(missing_ok=True)  # an earlier launch's decision is not this one's
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, asdict(share))
        print(f"posenc-run: {share.cells_per_gpu} cell(s) share each GPU ({share.why})", file=sys.stderr)
