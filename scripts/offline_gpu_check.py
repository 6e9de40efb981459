#!/usr/bin/env python3
"""The GPU check of a bare, offline machine, from a wheelhouse (``make wheelhouse``), in one go and
within 10 minutes, its install included (``BUDGET_S``; under 8 by the project's H200 figures,
``plan``):

1. ``install``: a fresh venv at ``--target`` made with ``--system-site-packages`` (the machine's own
   CUDA torch is used and never reinstalled), then ``pip install --no-index --find-links
   WHEELHOUSE posenc``: nothing from a network;
2. ``gpu_check``: ``make gpu-check`` (``scripts/gpu_check.py``: stock fairseq against the plugin,
   bf16), shortened to ``--gpu-check-updates`` updates and one round;
3. ``cold_cell``: one cell of the main job (``experiment=table4 seed=1 placement=both``, fp16,
   ``budget.max_update=--table4-updates``) with ``runtime.warm_trainer=false``, a fresh trainer
   process (it also binarizes the corpus, before anything is timed against anything);
4. the main job one cell at a time (``ONE_AT_A_TIME``) and packed on the GPU (``PACKED``),
   alternated so that a drift of the machine weighs on both: ``one_at_a_time_a`` (the cell of
   step 3, warm), ``packed`` (the 12 cells at once), ``one_at_a_time_b`` (``placement=none``);
   wall time, each cell's own, peak GPU memory and mean GPU use (``nvidia-smi``, twice a second),
   and the packed sweep's time per cell against one cell alone (``packed_to_one_at_a_time``);
5. ``warm_vs_cold``: step 4a's cell (forked by a warm trainer) against step 3's (a fresh trainer):
   every tensor of ``checkpoint_best.pt`` and the hypotheses, byte for byte; and ``warm_vs_warm``,
   the same cell of step 4a against the packed sweep's, both warm: where both differ, the GPU's own
   run-to-run differences (its non-deterministic kernels) are the cause, not the warm trainer;
6. ``decoding``: step 4a's in-trainer decoding against stock fairseq-generate on its checkpoint
   (``scripts/check_decoding.py``), every per-sentence line byte for byte;
7. ``paper_model``: ``model=fconv_table4 budget=paper`` (fp16) for ``--paper-updates`` updates, with
   a step time limit (``budget=paper`` has none): fairseq's own words/s and updates/s (medians of its
   ``train_inner`` records after the first), peak GPU memory.

Each step's figures go to ``--out`` (JSON, written whole and atomically) as soon as the step ends; a
step that failed, timed out or was skipped says so there, and nothing is read from a log it did not
finish. Every step has a time limit, and a step that no longer fits into what is left of
``BUDGET_S`` is skipped, saying why. Exit status: 0 when every step ran and passed, 1 otherwise, 2
without a CUDA device (after the install).

The machine needs (``needs``): a CUDA build of torch >= 2.11 (``MIN_TORCH``) in the Python that runs
this, outside any venv (a venv made from a venv sees its base Python's packages, not that venv's),
and that Python's ``venv`` module (Debian: ``python3-venv``). Run it from a checkout of this
repository: ``posenc-run`` is the installed wheel's (``PYTHONPATH`` is dropped), while
``scripts/gpu_check.py`` and ``scripts/check_decoding.py`` run from the checkout:

    python3 scripts/offline_gpu_check.py WHEELHOUSE [--target /tmp/posenc-offline] [--out gpu-figures.json]

``--cpu-rehearsal BIN_DIR`` (for this project, on a machine without a GPU) runs the same steps with
an installed posenc's ``BIN_DIR`` instead of the install, on the CPU, on a small corpus and fewer
cells (``CPU_REHEARSAL``): the check's own logic, not a GPU's figures.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from posenc.atomic import write_json_atomic  # noqa: E402  (the standard library only: any Python reads it)

# How cells share a GPU (runtime.cells_per_gpu, docs/clusters.md#several-cells-on-one-gpu); one place to change it.
PACKED = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=12", "runtime.cells_per_gpu=auto"]
ONE_AT_A_TIME = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=1", "runtime.cells_per_gpu=1"]
TABLE4 = ["experiment=table4"]
WARM_CELL = ["seed=1", "placement=both"]      # steps 3, 4a, 5, 6
OTHER_CELL = ["seed=1", "placement=none"]     # step 4b
MIN_TORCH = (2, 11)  # the wheelhouse's torchaudio 2.11.1 (make wheelhouse's TORCH_VERSION=2.11.0) requires it
BUDGET_S = 540       # every step ends (its kill's 40 s aside), or is skipped, within 9 minutes of the start
PAPER_STEP_TIMEOUT_MIN = 3
_TRAIN_INNER = re.compile(r"\| train_inner \| (\{.*\})\s*$")

# What each step should take on one H200, from the project's own figures there
# (results/h200_synthetic.md, issue 47): a gpu-check run took 43 s for 200 updates (about 11 updates
# a second, so about 25 s of start-up); a main-job cell about 40 s: 17-19 s of training for 214
# updates, 10-11 s of generation, the rest (about 11 s) start-up; the paper's model 16.5-19.6
# updates a second; the install about 2 minutes (issue 57, on that node). Nothing on the GPU has
# measured 12 cells packed: 3 cells' time is assumed (one cell used 0.66 GiB and a few percent of
# the GPU's arithmetic; the 16 cores start the 12 processes side by side).
H200 = {"install_s": 120, "gpu_check_start_s": 25, "gpu_check_update_s": 1 / 11, "cell_start_s": 11,
        "cell_update_s": 18 / 214, "cell_decode_s": 10.5, "paper_update_s": 1 / 16.5, "sweep_start_s": 5,
        "packed_cells_s": 3, "compare_s": 15}


@dataclass
class Mode:
    """What the steps train: the GPU check's real sizes, or the CPU rehearsal's small ones."""
    name: str
    precision: str
    packed_cells: list          # overrides that make the packed sweep's cells
    gpu_check: list             # extra flags of scripts/gpu_check.py
    table4: list = field(default_factory=list)   # extra overrides of every main-job cell
    paper: list = field(default_factory=list)    # extra overrides of the paper model's run
    packed: list = field(default_factory=lambda: list(PACKED))


GPU = Mode("gpu", "fp16", [], ["--rounds", "1"])
_SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
               "data.generator.test_long=20"]
CPU_REHEARSAL = Mode("cpu rehearsal", "fp32", ["seed=1", "placement=both,none"],
                     ["--rounds", "1", "--allow-cpu", "--size", "small", "--max-tokens", "1000",
                      "--data", "data.generator.train=300"],
                     ["budget=smoke", *_SMALL_DATA], ["budget.max_tokens=500", *_SMALL_DATA],
                     ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "runtime.cells_per_gpu=auto"])


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheelhouse", type=Path, nargs="?")
    p.add_argument("--target", type=Path, default=Path("/tmp/posenc-offline"), help="the fresh venv (replaced)")
    p.add_argument("--out", type=Path, default=Path("gpu-figures.json"))
    p.add_argument("--gpu-check-updates", type=int, default=40)
    p.add_argument("--table4-updates", type=int, default=50)
    p.add_argument("--paper-updates", type=int, default=200)
    p.add_argument("--cpu-rehearsal", type=Path, metavar="BIN_DIR",
                   help="no install and no GPU: the steps on the CPU with the posenc installed in BIN_DIR")
    opts = p.parse_args(argv)
    if opts.wheelhouse is None and opts.cpu_rehearsal is None:
        p.error("the wheelhouse is required (or --cpu-rehearsal BIN_DIR)")
    return opts


def plan(opts) -> dict:
    """Each step's expected seconds on one H200 (``H200``); the steps' order is this dict's."""
    f = H200
    cell = f["cell_start_s"] + opts.table4_updates * f["cell_update_s"] + f["cell_decode_s"]
    return {"install": f["install_s"],
            "gpu_check": 3 * (f["gpu_check_start_s"] + opts.gpu_check_updates * f["gpu_check_update_s"]),
            "cold_cell": cell + 10,  # the corpus binarized too
            "one_at_a_time_a": f["sweep_start_s"] + cell,
            "packed": f["sweep_start_s"] + f["packed_cells_s"] * cell,
            "one_at_a_time_b": f["sweep_start_s"] + cell,
            "warm_vs_cold": f["compare_s"],
            "warm_vs_warm": f["compare_s"],
            "decoding": f["cell_decode_s"] + 5,
            "paper_model": f["cell_start_s"] + opts.paper_updates * f["paper_update_s"] + f["cell_decode_s"]}


class Figures:
    """The JSON of figures, written whole and atomically after each step: a check cut short keeps
    every figure it measured, and a reader never sees half a file."""

    def __init__(self, path: Path, mode: Mode):
        self.path = path
        self.data = {"mode": mode.name, "python": platform.python_version(), "budget_s": BUDGET_S, "steps_s": {}}

    def put(self, key: str, value):
        self.data[key] = value
        write_json_atomic(self.path, self.data)
        return value


def needs() -> str:
    return (f"a CUDA build of torch >= {'.'.join(map(str, MIN_TORCH))} in the Python that runs this check, "
            "outside any venv, and that Python's venv module (Debian: python3-venv); the wheelhouse has no torch")


def torch_of(python: str) -> dict:
    """What ``python`` has of torch (``{}`` without one)."""
    code = "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda}))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def refusal(found: dict, in_venv: bool, has_venv: bool, allow_cpu: bool = False) -> str:
    """Why this Python cannot run the check (one line), or ""."""
    if in_venv:
        return f"{sys.executable} is a venv's Python: run this with the Python that has the machine's torch"
    if not found:
        return f"{sys.executable} has no torch"
    version = tuple(int(x) for x in re.findall(r"\d+", found["version"])[:2])
    if version < MIN_TORCH:
        return f"{sys.executable} has torch {found['version']}"
    if not found.get("cuda") and not allow_cpu:
        return f"{sys.executable} has torch {found['version']}, a build without CUDA"
    if not has_venv:
        return f"{sys.executable} cannot make a venv (no venv or ensurepip module)"
    return ""


def check_python(allow_cpu: bool = False) -> dict:
    """This Python's torch, or a stop in one line saying what the machine needs."""
    found = torch_of(sys.executable)
    has_venv = subprocess.run([sys.executable, "-c", "import venv, ensurepip"], capture_output=True).returncode == 0
    why = refusal(found, sys.prefix != sys.base_prefix, has_venv, allow_cpu)
    if why:
        sys.exit(f"offline-gpu-check: {why}; it needs {needs()}")
    return found


def torch_requirements(wheelhouse: Path) -> list:
    """The wheelhouse's requirements on torch (``torchaudio 2.11.1: torch==2.11.0``), from its wheels' metadata."""
    found = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        try:
            with zipfile.ZipFile(wheel) as archive:
                meta = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
                text = archive.read(meta).decode(errors="replace") if meta else ""
        except (OSError, zipfile.BadZipFile):
            continue
        name = " ".join(wheel.name.split("-")[:2])
        found += [f"{name}: {line.split(':', 1)[1].strip()}" for line in text.splitlines()
                  if re.match(r"Requires-Dist: torch\b(?![-\w])", line)]
    return found


def install(wheelhouse: Path, target: Path) -> Path:
    """A fresh venv over the machine's site-packages, with posenc from the wheelhouse alone."""
    if not any(wheelhouse.glob("posenc-*.whl")):
        sys.exit(f"offline-gpu-check: {wheelhouse} holds no posenc wheel; make one with make wheelhouse")
    shutil.rmtree(target, ignore_errors=True)
    must([sys.executable, "-m", "venv", "--system-site-packages", str(target)], "making the venv")
    must([str(target / "bin" / "python"), "-c", "import torch"], "torch from the venv")
    must([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
          "posenc"], f"installing from {wheelhouse} (the wheelhouse's torch requirements: "
         f"{'; '.join(torch_requirements(wheelhouse)) or 'none found'})")
    return target / "bin"


def must(argv, what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        sys.exit(f"offline-gpu-check: {what} failed (exit status {proc.returncode}): {last[0]}")


def device_of(bin_dir: Path) -> dict:
    code = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
            "'cuda': torch.version.cuda, 'gpu': torch.cuda.get_device_name(0) if c else None, "
            "'gpu_memory_gib': round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if c else None}))")
    return json.loads(subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


class GpuSampler:
    """``nvidia-smi`` twice a second while a step runs: peak memory used (MiB) and mean use (%)."""

    def __init__(self):
        self.rows, self.proc = [], None

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                                          "--format=csv,noheader,nounits", "-lms", "500"],
                                         stdout=subprocess.PIPE, text=True)
            threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            self.rows.append(line)

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()

    def summary(self) -> dict:
        return summarize_samples(self.rows)


def summarize_samples(rows) -> dict:
    """``nvidia-smi`` CSV rows (``memory.used, utilization.gpu`` of each GPU) -> peak MiB and mean %."""
    pairs = []
    for row in rows:
        try:
            memory, use = (float(x) for x in row.split(","))
        except ValueError:
            continue
        pairs.append((memory, use))
    if not pairs:
        return {"peak_memory_mib": None, "mean_use_pct": None, "samples": 0}
    return {"peak_memory_mib": max(m for m, _ in pairs), "mean_use_pct": round(statistics.mean(u for _, u in pairs), 1),
            "samples": len(pairs)}


def timed(argv, cwd: Path, env: dict, log: Path, timeout_s: float) -> dict:
    """Run one step's command, its output into ``log``, for at most ``timeout_s`` (then its whole
    process group is stopped: SIGTERM, SIGKILL 10 s later)."""
    started = time.monotonic()
    with GpuSampler() as gpu, open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status, timed_out = proc.wait(timeout=max(1.0, timeout_s)), False
        except subprocess.TimeoutExpired:
            status, timed_out = stop_group(proc), True
    return {"wall_s": round(time.monotonic() - started, 1), "exit_status": status, "timed_out": timed_out,
            **gpu.summary(), "log": str(log)}


def stop_group(proc: subprocess.Popen):
    for signum, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    return proc.poll()


def passed(result: dict) -> bool:
    return result.get("exit_status") == 0 and not result.get("timed_out")


def throughput(train_log: Path) -> dict:
    """Medians of fairseq's own words/s and updates/s over its train_inner records after the first."""
    records = [json.loads(m.group(1)) for line in train_log.read_text(errors="replace").splitlines()
               if (m := _TRAIN_INNER.search(line))]
    steady = records[1:] or records
    if not steady:
        return {"wps": None, "ups": None, "records": 0}
    return {"wps": statistics.median(float(r["wps"]) for r in steady),
            "ups": statistics.median(float(r["ups"]) for r in steady), "records": len(steady)}


def cells_of(folder: Path) -> list:
    """The records of the cells under ``folder`` (a sweep, or one cell's directory)."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("**/result.json"))]


def cell_dir(folder: Path, cell: list = WARM_CELL):
    """The directory of ``cell`` (``["seed=1", "placement=both"]``) under ``folder`` (a sweep, or the
    cell's own directory), by its record; None where there is not exactly one."""
    wanted = dict(o.split("=", 1) for o in cell)
    found = [p.parent for p in sorted(folder.glob("**/result.json"))
             if all(str(json.loads(p.read_text()).get(k)) == v for k, v in wanted.items())]
    return found[0] if len(found) == 1 else None


@dataclass
class Check:
    """One run of the check: where it works, with what, and until when."""
    opts: argparse.Namespace
    mode: Mode
    bin_dir: Path
    work: Path
    env: dict
    figures: Figures
    deadline: float = None     # time.monotonic() by which every step has ended; None: no budget

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def table4(self, *overrides) -> list:
        return [*TABLE4, *self.mode.table4, f"precision={self.mode.precision}",
                f"budget.max_update={self.opts.table4_updates}", *overrides]

    def figure(self, name: str) -> dict:
        return self.figures.data.get(name) or {}


@dataclass
class Step:
    name: str
    run: object               # (check, timeout_s) -> the step's figures
    needs: tuple = ()         # steps that must have passed first
    when: object = None       # (check) -> whether the step is wanted at all


def run_posenc(check: Check, name: str, overrides: list, timeout_s: float, multirun: bool = False) -> dict:
    """``posenc-run`` (a sweep with ``multirun``) into ``work/NAME``; its cells' outcomes from their
    own records (each written whole by its cell, whatever became of the step)."""
    folder = check.work / name
    shutil.rmtree(folder, ignore_errors=True)
    where = f"hydra.{'sweep' if multirun else 'run'}.dir={folder}"
    argv = [str(check.bin_dir / "posenc-run"), *(["-m"] if multirun else []), *overrides, where]
    result = timed(argv, check.work, check.env, check.work / f"{name}.log", timeout_s)
    cells = [{k: r.get(k) for k in ("placement", "seed", "status", "error", "cell_wall_s", "train_wall_s", "device")}
             for r in cells_of(folder)]
    result.update(overrides=overrides, cells=cells, cells_ok=sum(c["status"] == "ok" for c in cells))
    result["passed"] = passed(result) and bool(cells) and result["cells_ok"] == len(cells)
    return result


def gpu_check_step(check: Check, timeout_s: float) -> dict:
    out = check.work / "gpu_check.json"
    out.unlink(missing_ok=True)
    argv = [str(check.bin_dir / "python"), str(REPO / "scripts" / "gpu_check.py"), "--max-update",
            str(check.opts.gpu_check_updates), "--log-interval", "10", "--cache", str(check.work / "cache"),
            "--json", str(out), *check.mode.gpu_check]
    result = timed(argv, check.work, check.env, check.work / "gpu_check.log", timeout_s)
    result["figures"] = json.loads(out.read_text()) if passed(result) and out.exists() else None
    return result


def cold_cell_step(check: Check, timeout_s: float) -> dict:
    return run_posenc(check, "cold_cell", check.table4(*WARM_CELL, "runtime.warm_trainer=false"), timeout_s)


def one_at_a_time_a_step(check: Check, timeout_s: float) -> dict:
    return run_posenc(check, "one_at_a_time_a", check.table4(*WARM_CELL, *ONE_AT_A_TIME), timeout_s, multirun=True)


def packed_step(check: Check, timeout_s: float) -> dict:
    return run_posenc(check, "packed", check.table4(*check.mode.packed_cells, *check.mode.packed), timeout_s,
                      multirun=True)


def one_at_a_time_b_step(check: Check, timeout_s: float) -> dict:
    result = run_posenc(check, "one_at_a_time_b", check.table4(*OTHER_CELL, *ONE_AT_A_TIME), timeout_s, multirun=True)
    alone = [check.figure("one_at_a_time_a"), result]
    if all(r.get("passed") for r in [*alone, check.figure("packed")]):
        check.figures.put("packed_to_one_at_a_time", sharing_ratio(check.figure("packed"), alone))
    return result


def sharing_ratio(packed: dict, alone: list) -> dict:
    """The packed sweep's wall time per cell against a cell's one at a time (each a sweep of one
    cell, so both pay a sweep's start and a warm trainer's once per cell)."""
    per_cell = packed["wall_s"] / max(1, len(packed["cells"]))
    one = statistics.mean(r["wall_s"] for r in alone)
    return {"packed_s_per_cell": round(per_cell, 1), "one_at_a_time_s_per_cell": round(one, 1),
            "ratio": round(per_cell / one, 3), "cells_packed": len(packed["cells"]), "cells_one_at_a_time": len(alone)}


COMPARE = """
import json, sys, torch
from pathlib import Path
from posenc.trainer.warm import WARM_START_MARK
a, b = (Path(p) for p in sys.argv[1:3])
ta, tb = (torch.load(c / "checkpoints" / "checkpoint_best.pt", map_location="cpu", weights_only=False)["model"]
          for c in (a, b))
differ = sorted(k for k in ta.keys() | tb.keys() if k not in ta or k not in tb or not torch.equal(ta[k], tb[k]))
gaps = [(ta[k].double() - tb[k].double()).abs().max().item() for k in differ
        if k in ta and k in tb and ta[k].shape == tb[k].shape]
hyps = sorted(p.name for p in a.glob("hypotheses*.txt"))
print(json.dumps({"tensors": len(ta), "tensors_differing": len(differ), "max_abs_diff": max(gaps, default=0.0),
                  "hypotheses_files": hyps,
                  "hypotheses_identical": bool(hyps) and all((a / h).read_bytes() == (b / h).read_bytes()
                                                             if (b / h).exists() else False for h in hyps),
                  "warm_started": [WARM_START_MARK in (c / "train.log").read_text(errors="replace") for c in (a, b)]}))
"""


def compare_cells(check: Check, name: str, first: str, second: str, timeout_s: float) -> dict:
    """Two cells' ``checkpoint_best.pt`` tensor by tensor and their hypotheses byte for byte."""
    a, b = cell_dir(check.work / first), cell_dir(check.work / second)
    argv = [str(check.bin_dir / "python"), "-c", COMPARE, str(a), str(b)]
    result = timed(argv, check.work, check.env, check.work / f"{name}.log", timeout_s)
    if passed(result):
        result.update(json.loads((check.work / f"{name}.log").read_text().strip().splitlines()[-1]))
        result["identical"] = result["tensors_differing"] == 0 and result["hypotheses_identical"]
    result["cells"] = [first, second]
    return result


def warm_vs_cold_step(check: Check, timeout_s: float) -> dict:
    result = compare_cells(check, "warm_vs_cold", "one_at_a_time_a", "cold_cell", timeout_s)
    result["passed"] = bool(result.get("identical")) and result.get("warm_started") == [True, False]
    return result


def warm_vs_warm_step(check: Check, timeout_s: float) -> dict:
    """The same cell twice from a warm trainer (step 4a alone, and in the packed sweep): where it
    differs too, the GPU's own run-to-run differences (non-deterministic kernels) are the cause."""
    result = compare_cells(check, "warm_vs_warm", "one_at_a_time_a", "packed", timeout_s)
    result["passed"] = bool(result.get("identical")) and result.get("warm_started") == [True, True]
    return result


def decoding_step(check: Check, timeout_s: float) -> dict:
    cell = cell_dir(check.work / "one_at_a_time_a")
    argv = [str(check.bin_dir / "python"), str(REPO / "scripts" / "check_decoding.py"), str(cell)]
    result = timed(argv, check.work, check.env, check.work / "decoding.log", timeout_s)
    if not result["timed_out"]:  # check_decoding.py's own verdict, one line per split, then its summary
        result["verdict"] = (check.work / "decoding.log").read_text(errors="replace").strip().splitlines()[-3:]
    return result


def paper_model_step(check: Check, timeout_s: float) -> dict:
    overrides = ["model=fconv_table4", "budget=paper", *check.mode.paper, f"precision={check.mode.precision}",
                 f"budget.max_update={check.opts.paper_updates}", f"budget.step_timeout_min={PAPER_STEP_TIMEOUT_MIN}"]
    result = run_posenc(check, "paper_model", overrides, timeout_s)
    log = check.work / "paper_model" / "train.log"
    result.update(throughput(log) if result["passed"] and log.exists() else {"wps": None, "ups": None, "records": 0})
    if result["passed"] and not result["records"]:
        result["why_no_speed"] = "fairseq logged no train_inner record after its first (one every 50 updates)"
    return {**result, "updates": check.opts.paper_updates}


STEPS = [Step("gpu_check", gpu_check_step),
         Step("cold_cell", cold_cell_step),
         Step("one_at_a_time_a", one_at_a_time_a_step, needs=("cold_cell",)),
         Step("packed", packed_step, needs=("cold_cell",)),
         Step("one_at_a_time_b", one_at_a_time_b_step, needs=("cold_cell",)),
         Step("warm_vs_cold", warm_vs_cold_step, needs=("cold_cell", "one_at_a_time_a")),
         Step("warm_vs_warm", warm_vs_warm_step, needs=("one_at_a_time_a", "packed")),
         Step("decoding", decoding_step, needs=("one_at_a_time_a",)),
         Step("paper_model", paper_model_step)]


def run_step(check: Check, step: Step, estimate_s: float):
    """One step's figures (None: not wanted): skipped, saying why, where a step it needs did not
    pass or it no longer fits in the budget; else run with what is left of the budget as its limit."""
    if step.when is not None and not step.when(check):
        return None
    unmet = [name for name in step.needs if not check.figure(name).get("passed")]
    if unmet:
        return {"passed": False, "skipped": f"needs {', '.join(unmet)}, which did not pass"}
    left = check.left()
    if left < estimate_s:
        return {"passed": False, "skipped": f"{max(0, left):.0f} s left of the {BUDGET_S} s budget; the step takes "
                                            f"about {estimate_s:.0f} s on one H200"}
    started = time.monotonic()
    result = step.run(check, left)
    result.setdefault("passed", passed(result))
    result["step_s"] = round(time.monotonic() - started, 1)
    return result


def run_steps(check: Check, steps: list, estimates: dict) -> list:
    """Every step in turn, each one's figures written as it ends; the names of those that did not pass."""
    failed = []
    for step in steps:
        result = run_step(check, step, estimates[step.name])
        if result is None:
            continue
        check.figures.data["steps_s"][step.name] = result.get("step_s", 0)
        check.figures.put(step.name, result)
        if not result["passed"]:
            failed.append(step.name)
        state = "passed" if result["passed"] else f"skipped: {result['skipped']}" if "skipped" in result else "FAILED"
        say(f"{step.name}: {state} ({result.get('step_s', 0):.0f} s; log: {result.get('log', '-')})")
    return failed


def say(line: str) -> None:
    print(f"offline-gpu-check: {line}", file=sys.stderr, flush=True)


def prepare(opts, mode: Mode, figures: Figures) -> Path:
    """The bin directory of the posenc the steps run: installed from the wheelhouse (the first step,
    timed), or, for the CPU rehearsal, the one given."""
    if opts.cpu_rehearsal:
        figures.put("torch", torch_of(str(opts.cpu_rehearsal / "python")))
        return opts.cpu_rehearsal.resolve()
    found = figures.put("torch", check_python())
    say(f"torch {found['version']} (CUDA {found['cuda']}) in {sys.executable}, as the check needs: {needs()}")
    started = time.monotonic()
    bin_dir = install(opts.wheelhouse.resolve(), opts.target.resolve())
    figures.data["steps_s"]["install"] = round(time.monotonic() - started, 1)
    figures.put("install", {"passed": True, "wall_s": figures.data["steps_s"]["install"], "venv": str(opts.target)})
    say(f"install: passed ({figures.data['steps_s']['install']:.0f} s)")
    return bin_dir


def main(argv=None) -> int:
    started = time.monotonic()
    opts = parse_cli(argv)
    mode = CPU_REHEARSAL if opts.cpu_rehearsal else GPU
    figures = Figures(opts.out.resolve(), mode)
    figures.put("needs", needs())
    bin_dir = prepare(opts, mode, figures)
    figures.put("machine", device_of(bin_dir))
    if not figures.data["machine"]["gpu"] and mode is GPU:
        say("installed, but torch sees no CUDA device; nothing here is meant for a CPU")
        return 2
    work = opts.target.resolve() / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not the checkout
    env.update(POSENC_CACHE=str(work / "cache"), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    check = Check(opts, mode, bin_dir, work, env, figures, None if mode is not GPU else started + BUDGET_S)
    failed = run_steps(check, STEPS, plan(opts))
    figures.data["steps_s"]["all"] = round(time.monotonic() - started, 1)
    figures.put("finished", True)
    say(f"{'every step passed' if not failed else 'not passed: ' + ', '.join(failed)}; "
        f"{figures.data['steps_s']['all']:.0f} s in all; the figures: {opts.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
