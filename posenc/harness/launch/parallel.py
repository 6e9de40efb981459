"""Cells that run at the same time on one machine: each gets its share of the cores and, under joblib
on a machine with GPUs, GPUs of its own. (``submitit_local`` shows every cell the same first
``hydra.launcher.gpus_per_node`` GPUs, none by default, as the README says: a cell there that finds
no GPU trains on the CPU, and its record's ``device`` says so.)

Which launcher runs cells side by side: ``hydra/launcher=joblib`` (``hydra.launcher.n_jobs`` at a
time) and ``submitit_local`` (every cell of the sweep at once). The basic launcher runs one cell at
a time, and a SLURM job has its own allocation: those cells get nothing added, and fairseq uses
the cores and GPU as it would by default.
"""

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from filelock import FileLock, Timeout

from posenc.harness.errors import ConfigError

JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SUBMITIT_LOCAL = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"


def machine_cores() -> int:
    """Cores this process may use, as joblib counts them (the affinity mask and a container's CPU
    quota both count), so that our share and the one joblib gives its workers agree."""
    try:
        import joblib
        return max(1, int(joblib.cpu_count()))
    except ImportError:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def concurrent_cells(launcher, cells_in_sweep: int, cores: int = None) -> int:
    """How many cells of this sweep run at once on this machine, from the launcher's config."""
    target = str(launcher.get("_target_", "")) if launcher is not None else ""
    cells = max(1, cells_in_sweep)
    if target == JOBLIB:
        n_jobs = int(launcher.get("n_jobs", -1))
        cores = cores or machine_cores()
        # joblib's convention: -1 is every core, -2 all but one, ...
        workers = n_jobs if n_jobs > 0 else max(1, cores + 1 + n_jobs)
        return min(workers, cells)
    if target == SUBMITIT_LOCAL:
        return cells  # submitit's local executor starts every job of the array at once
    return 1


def thread_share(concurrent: int, cores: int = None) -> int:
    """Threads per cell so that ``concurrent`` cells share the cores instead of fighting for them."""
    return max(1, (cores or machine_cores()) // max(1, concurrent))


def threads_env(concurrent: int, environ=None) -> dict:
    """``OMP_NUM_THREADS`` (torch's intra-op threads in fairseq) for a cell that runs beside others;
    nothing for a cell that runs alone. A value already in the environment is kept (the user's own,
    or the one joblib sets in its workers: the same share) and written out, so that the cell's
    ``commands.sh`` reruns it with the threads it had."""
    environ = os.environ if environ is None else environ
    if concurrent <= 1:
        return {}
    return {"OMP_NUM_THREADS": environ.get("OMP_NUM_THREADS") or str(thread_share(concurrent))}


def visible_gpus(environ=None) -> list:
    """The GPUs this process may use, without importing torch: ``CUDA_VISIBLE_DEVICES`` where it is
    set, else the devices ``nvidia-smi -L`` lists, else none."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


@contextlib.contextmanager
def gpu_slots(lock_dir: Path, gpus: list, needed: int, poll_s: float = 2.0, say=None):
    """Hold ``needed`` of ``gpus`` for as long as the block runs; yield their ids. One lock file per
    GPU under ``lock_dir``: cells running side by side never share a GPU, whichever cell finishes
    first (a job number modulo the GPU count would not promise that). Waits while all are taken."""
    if needed > len(gpus):
        raise ConfigError(f"gpus={needed} per cell, but this machine shows {len(gpus)} GPU(s) "
                          f"({', '.join(gpus) or 'none'}); allowed: at most {len(gpus)}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        held = []
        for gpu in gpus:
            lock = FileLock(str(lock_dir / f"gpu-{gpu}.lock"))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            held.append((gpu, lock))
            if len(held) == needed:
                break
        if len(held) == needed:
            break
        for _, lock in held:  # never sit on some while waiting for more: two cells could deadlock
            lock.release()
        if say and not waited:
            say(f"waiting for {needed} free GPU(s) of {len(gpus)}")
            waited = True
        time.sleep(poll_s)
    try:
        yield [gpu for gpu, _ in held]
    finally:
        for _, lock in held:
            lock.release()


@contextlib.contextmanager
def cell_resources(cell, launcher, cells_in_sweep: int, sweep_dir: Path, say=None):
    """The environment this cell's (a ResolvedCell's) fairseq children get on top of the user's: a
    thread share when cells run side by side, and their own GPUs when they do so on a machine with GPUs."""
    concurrent = concurrent_cells(launcher, cells_in_sweep)
    # A thread count the user chose in the config (runtime.threads) is already in the cell's environment.
    env = {} if "OMP_NUM_THREADS" in cell.environment else threads_env(concurrent)
    gpus = visible_gpus() if concurrent > 1 and str(launcher.get("_target_", "")) == JOBLIB and cell.gpus > 0 else []
    if not gpus:
        yield env
        return
    with gpu_slots(Path(sweep_dir) / ".gpu-slots", gpus, cell.gpus, say=say) as mine:
        yield dict(env, CUDA_VISIBLE_DEVICES=",".join(mine))
