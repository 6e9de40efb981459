"""Cells that run at the same time on one machine: each gets its share of the cores and, under joblib
on a machine with GPUs, its slot on a GPU that a few cells share (``posenc.harness.launch.sharing``
decides how many). (``submitit_local`` shows every cell the same first
``hydra.launcher.gpus_per_node`` GPUs, none by default, as the README says: a cell there that finds
no GPU trains on the CPU, and its record's ``device`` says so.)

Which launcher runs cells side by side: ``hydra/launcher=joblib`` (``hydra.launcher.n_jobs`` at a
time) and ``submitit_local`` (every cell of the sweep at once). The basic launcher runs one cell at
a time, and a SLURM job has its own allocation: those cells get nothing added, and fairseq uses
the cores and GPU as it would by default.
"""

import contextlib
import os
import time
from pathlib import Path

from filelock import FileLock, Timeout

from posenc.harness import machine
from posenc.harness.errors import ConfigError
from posenc.harness.launch.slurm_groups import KEY as TASK_KEY
from posenc.harness.launch.slurm_groups import cells_per_task

JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SUBMITIT_LOCAL = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
SLOTS_DIR = ".gpu-slots"  # under the sweep directory: the GPU slots' lock files, and the share decided


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
    """The GPUs this process may use, without importing torch here: ``CUDA_VISIBLE_DEVICES`` where it is
    set, else the devices ``nvidia-smi -L`` lists (a MIG GPU's instances by UUID), else as many as
    torch counts in a child (a node without nvidia-smi), so that cells side by side still take one
    slot each rather than all landing on cuda:0 at once."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"]
    return machine.cuda_devices() or [str(i) for i in range(machine.cuda_device_count(dict(environ)))]


class _Slots:
    """The lock files of one sweep's GPUs: ``gpu-<id>-<k>.lock`` for each of the ``per_gpu`` cells a GPU
    takes at once, and ``gpu-<id>-alone.lock``, held by a cell that waits to have the GPU to itself
    (cells that share then keep off that GPU, so the one waiting is not starved)."""

    def __init__(self, lock_dir: Path, per_gpu: int):
        self.lock_dir, self.per_gpu = lock_dir, per_gpu

    def load(self, gpu) -> int:
        """How many of ``gpu``'s slots other cells hold now (a glance: the slot itself is then taken by lock)."""
        taken = 0
        for k in range(self.per_gpu):
            slot = self.lock(gpu, k)
            if _try(slot):
                slot.release()
            else:
                taken += 1
        return taken

    def order(self, gpus: list) -> list:
        """``gpus`` least loaded first, so cells spread over the GPUs instead of filling the first; among
        equals, the ones this process had last (a worker's next cell stays where its warm trainer is)."""
        last = _LAST_HELD.get(str(self.lock_dir), [])
        return sorted(gpus, key=lambda gpu: (self.load(gpu), gpu not in last))

    def lock(self, gpu, name) -> FileLock:
        return FileLock(str(self.lock_dir / f"gpu-{gpu}-{name}.lock"))

    def one_slot(self, gpu):
        """A free slot of ``gpu`` (its lock, held), or None: all taken, or a cell waits to run alone there."""
        alone = self.lock(gpu, "alone")
        if not _try(alone):
            return None
        alone.release()
        for k in range(self.per_gpu):
            slot = self.lock(gpu, k)
            if _try(slot):
                return slot
        return None

    def shared(self, gpus: list, needed: int) -> list:
        """A slot on each of ``needed`` GPUs, all at once or none: ``[(gpu, {"slot": lock})]`` or []."""
        held = []
        for gpu in self.order(gpus):
            slot = self.one_slot(gpu)
            if slot:
                held.append((gpu, {"slot": slot}))
                if len(held) == needed:
                    _LAST_HELD[str(self.lock_dir)] = [g for g, _ in held]
                    return held
        release(held)  # never sit on some while waiting for more: two cells could deadlock
        return []

    def alone(self, gpus: list, needed: int, held: list) -> list:
        """``needed`` GPUs to this cell alone: first their alone locks, all at once or none (so two cells
        that wait never hold half each), then each GPU's slots as the cells on it finish. ``held``
        (``[(gpu, {name: lock})]``) carries what it holds from one try to the next."""
        if not held:
            for gpu in gpus:
                alone = self.lock(gpu, "alone")
                if _try(alone):
                    held.append((gpu, {"alone": alone}))
                    if len(held) == needed:
                        break
            if len(held) < needed:
                release(held)
                held.clear()
                return []
        for gpu, locks in held:
            for k in range(self.per_gpu):
                if k not in locks:
                    slot = self.lock(gpu, k)
                    if _try(slot):
                        locks[k] = slot
        return held if all(len(locks) == self.per_gpu + 1 for _, locks in held) else []


# The GPUs this process's last cell of each sweep held (its own memory, of its own cells only).
_LAST_HELD: dict = {}


def _try(lock: FileLock) -> bool:
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True


def release(held: list) -> None:
    for _, locks in held:
        for lock in locks.values():
            lock.release()


@contextlib.contextmanager
def gpu_slots(lock_dir: Path, gpus: list, needed: int, poll_s: float = 2.0, say=None, per_gpu: int = 1,
              alone: bool = False):
    """Hold a slot on each of ``needed`` of ``gpus`` for as long as the block runs; yield their ids.
    Each GPU takes ``per_gpu`` cells at once (``runtime.cells_per_gpu``); ``alone``: every slot of
    each GPU it takes (a cell run again after it ran out of memory beside others). Lock files under
    ``lock_dir`` (``_Slots``): cells side by side never take more than their share, whichever finishes
    first (a job number modulo the GPU count would not promise that). Waits while none is free."""
    if needed > len(gpus):
        raise ConfigError(f"gpus={needed} per cell, but this machine shows {len(gpus)} GPU(s) "
                          f"({', '.join(gpus) or 'none'}); allowed: at most {len(gpus)}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    slots, held, waited = _Slots(lock_dir, per_gpu), [], False
    try:
        while True:
            got = slots.alone(gpus, needed, held) if alone else slots.shared(gpus, needed)
            if got:
                held = got
                break
            if say and not waited:
                share = "alone" if alone else "free"
                say(f"waiting for {needed} {share} GPU(s) of {len(gpus)}"
                    + (f" ({per_gpu} cells each)" if per_gpu > 1 else ""))
                waited = True
            time.sleep(poll_s)
        yield [gpu for gpu, _ in held]
    finally:
        release(held)


@contextlib.contextmanager
def cell_resources(cell, launcher, cells_in_sweep: int, sweep_dir: Path, say=None, per_gpu: int = 1,
                   alone: bool = False):
    """The environment this cell's (a ResolvedCell's) fairseq children get on top of the user's: a
    thread share when cells run side by side, and their GPUs when they do so on a machine with GPUs:
    a slot on each of ``cell.gpus`` GPUs that ``per_gpu`` cells share (``launch.sharing``), or, with
    ``alone``, those GPUs to itself."""
    concurrent = concurrent_cells(launcher, cells_in_sweep)
    # A thread count the user chose in the config (runtime.threads) is already in the cell's environment.
    env = {} if "OMP_NUM_THREADS" in cell.environment else threads_env(concurrent)
    lock_dir = slots_dir(launcher, concurrent, sweep_dir) if cell.gpus > 0 else None
    gpus = visible_gpus() if lock_dir else []
    if not gpus:
        yield env
        return
    with gpu_slots(lock_dir, gpus, cell.gpus, say=say, per_gpu=per_gpu, alone=alone) as mine:
        # Slot ids are nvidia-smi's (PCI bus) order; CUDA numbers by speed unless told otherwise.
        yield dict(env, CUDA_VISIBLE_DEVICES=",".join(mine),
                   CUDA_DEVICE_ORDER=os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID"))


def task_cells(launcher, environ=None) -> int:
    """How many cells share this process's SLURM array task and its GPU(s) (``hydra.launcher.cells_per_task``,
    ``launch.slurm_groups``): 1 outside a SLURM job, or where each cell has a task of its own."""
    environ = os.environ if environ is None else environ
    if launcher is None or not environ.get("SLURM_JOB_ID"):
        return 1
    return cells_per_task(launcher.get(TASK_KEY, 1))  # the launcher refused a bad value before it submitted


def slots_dir(launcher, concurrent: int, sweep_dir, environ=None):
    """Where the GPU slots of the cells that share this cell's GPUs are kept, or None where it shares
    none: the sweep's, for joblib cells side by side on this machine; the array task's own, for the
    cells of one SLURM array task (other tasks of the array are on other GPUs, perhaps other nodes)."""
    environ = os.environ if environ is None else environ
    if task_cells(launcher, environ) > 1:
        return Path(sweep_dir) / SLOTS_DIR / f"slurm-{environ['SLURM_JOB_ID']}"
    if concurrent > 1 and str(launcher.get("_target_", "")) == JOBLIB:
        return Path(sweep_dir) / SLOTS_DIR
    return None
