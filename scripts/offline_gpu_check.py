#!/usr/bin/env python3
"""The GPU check of a bare, offline machine, from a wheelhouse (``make wheelhouse``), in one go:

1. install: a fresh venv at ``--target`` made with ``--system-site-packages`` (the machine's own
   CUDA torch is used and never reinstalled), then ``pip install --no-index --find-links
   WHEELHOUSE posenc``: nothing from a network;
2. ``make gpu-check`` (``scripts/gpu_check.py``: stock fairseq against the plugin, bf16), shortened
   to ``--gpu-check-updates`` updates and one round;
3. table 4's cells (``experiment=table4``, fp16, ``budget.max_update=--table4-updates``; placements
   ``PLACEMENTS`` of seeds 1 and 2) packed on the GPU (``PACKED``) and one at a time (``ONE_AT_A_TIME``),
   interleaved (seed 1: one at a time, then packed; seed 2: packed, then one at a time): wall time
   of each sweep and their ratio, peak GPU memory and mean GPU use (``nvidia-smi``, twice a second);
4. one cell with the warm trainer and cold (``runtime.warm_trainer=false``): their hypotheses byte
   for byte; and the warm cell's decoding in the trainer against its own fairseq-generate line
   (``commands.sh``) run again: fairseq's S/T/H/D/P lines byte for byte;
5. the paper's model (``model=fconv_table4 budget=paper``, fp16, a ``PAPER_TIMEOUT_MIN`` step
   timeout) for ``--paper-updates`` updates: fairseq's own words/s and updates/s (medians of its
   ``train_inner`` records after the first, read only from a log this run finished), peak GPU memory.

Every figure goes to ``--out`` (JSON, written atomically) as it is measured. Its length by the
project's own H200 figures (results/h200_synthetic.md: a gpu-check run 43 s for 200 updates; a
table 4 cell about 40 s, 17-19 s of it 214 updates, 10-11 s decoding), an estimate, as it has not
run on a GPU: install about 2 min, gpu-check about 1.5, table 4 about 2.5 (4 cells of about 24 s
one at a time, 4 packed two at a time), warm and cold about 1, the paper's model about 0.5: under
8 minutes. Run it with the Python that has the machine's torch, from a checkout of this
repository: ``posenc-run`` is the installed wheel's (``PYTHONPATH`` is dropped), while
``scripts/gpu_check.py`` runs from the checkout, as ``make gpu-check`` does:

    python3 scripts/offline_gpu_check.py WHEELHOUSE [--target /tmp/posenc-offline] [--out gpu-figures.json]

The node needs a CUDA build of torch >= 2.11 (torchaudio 2.11.1, in the wheelhouse, requires it;
the wheelhouse holds no torch), installed outside any venv, in the Python that runs this, with its
``venv`` module; the check says so as it starts, and stops in one line where torch is older or CPU-only.

Without a CUDA device it stops with one line (exit status 2) after the install. ``--cpu`` rehearses the
same steps on a CPU with the running Python's posenc (no install; fp32, ``budget=smoke``): it shows what
each step writes and when, not a figure of any GPU.
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from posenc.atomic import write_json_atomic  # noqa: E402  (standard library only: runs before the install)

# How cells share a GPU (runtime.cells_per_gpu, docs/clusters.md#several-cells-on-one-gpu); one place to change it.
PACKED = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=4", "runtime.cells_per_gpu=auto"]
ONE_AT_A_TIME = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=1", "runtime.cells_per_gpu=1"]
PLACEMENTS = "both,none"  # 2 cells a sweep: 4 one at a time and 4 packed in all, to fit the 8 minutes
CELL = ["precision=fp16", "gpus=1"]        # a table 4 cell on the GPU
PAPER = ["precision=fp16"]
CPU_CELL = ["precision=fp32", "gpus=0", "budget=smoke"]  # --cpu: the same steps on a CPU (a rehearsal, no figure)
CPU_PAPER = ["precision=fp32", "gpus=0"]
PAPER_TIMEOUT_MIN = 5  # the paper step's limit: 200 updates take about 12 s on an H200 (results/h200_synthetic.md)
MIN_TORCH = (2, 11)    # torchaudio 2.11.1, in the wheelhouse, requires torch 2.11
NEEDS = ("the node must have a CUDA build of torch >= 2.11 (torchaudio 2.11.1 in the wheelhouse requires it; the "
         "wheelhouse holds no torch) installed outside any venv, in the Python that runs this, with its venv module")
_TRAIN_INNER = re.compile(r"\| train_inner \| (\{.*\})\s*$")


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheelhouse", type=Path)
    p.add_argument("--target", type=Path, default=Path("/tmp/posenc-offline"), help="the fresh venv (replaced)")
    p.add_argument("--out", type=Path, default=Path("gpu-figures.json"))
    p.add_argument("--gpu-check-updates", type=int, default=60)
    p.add_argument("--table4-updates", type=int, default=40)
    p.add_argument("--paper-updates", type=int, default=200)
    p.add_argument("--cpu", action="store_true", help="rehearse the steps on a CPU with this Python's posenc "
                   "(no install; fp32, budget=smoke): what each step writes, not a figure")
    return p.parse_args(argv)


class Figures:
    """The JSON of figures, rewritten whole (``posenc.atomic``, from the checkout) after each figure: a
    check cut short keeps what it measured."""

    def __init__(self, path: Path):
        self.path, self.data = path, {"python": platform.python_version(), "steps_s": {}}

    def put(self, key: str, value) -> None:
        self.data[key] = value
        write_json_atomic(self.path, self.data)


def install(wheelhouse: Path, target: Path) -> Path:
    """A fresh venv over the machine's site-packages, with posenc from the wheelhouse alone."""
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit(f"offline-gpu-check: {sys.executable} has no torch; run this with the Python that has the "
                 "machine's CUDA torch >= 2.11, outside any venv (the wheelhouse leaves torch out)")
    refused = torch_refusal(sys.executable)
    if refused:
        sys.exit(f"offline-gpu-check: {refused}; {NEEDS}")
    if not any(wheelhouse.glob("posenc-*.whl")):
        sys.exit(f"offline-gpu-check: {wheelhouse} holds no posenc wheel; make one with make wheelhouse")
    shutil.rmtree(target, ignore_errors=True)
    must([sys.executable, "-m", "venv", "--system-site-packages", str(target)], "making the venv")
    must([str(target / "bin" / "python"), "-c", "import torch"], "torch from the venv (a venv made from another "
         "venv sees its base Python's packages, not that venv's; run this with the Python that holds torch)")
    must([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
          "posenc"], f"installing from {wheelhouse}")
    return target / "bin"


def torch_refusal(python: str, version: str = None) -> str:
    """Why ``python``'s torch cannot run the check (older than ``MIN_TORCH``, or a build without CUDA), or ""."""
    if version is None:
        code = "import torch; print(torch.__version__, torch.version.cuda)"
        version = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()
    release, _, cuda = version.partition(" ")
    numbers = tuple(int(x) for x in re.findall(r"\d+", release.split("+")[0])[:2])
    if numbers < MIN_TORCH:
        return f"{python} has torch {release}, older than {'.'.join(map(str, MIN_TORCH))}"
    if cuda in ("", "None"):
        return f"{python} has torch {release} built without CUDA"
    return ""


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


def timed(argv, cwd: Path, env: dict, log: Path) -> dict:
    started = time.monotonic()
    with GpuSampler() as gpu, open(log, "w") as out:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return {"wall_s": round(time.monotonic() - started, 1), "exit_status": proc.returncode, **gpu.summary(),
            "log": str(log)}


def throughput(train_log: Path) -> dict:
    """Medians of fairseq's own words/s and updates/s over its train_inner records after the first."""
    records = [json.loads(m.group(1)) for line in train_log.read_text(errors="replace").splitlines()
               if (m := _TRAIN_INNER.search(line))]
    steady = records[1:] or records
    if not steady:
        return {"wps": None, "ups": None, "records": 0}
    return {"wps": statistics.median(float(r["wps"]) for r in steady),
            "ups": statistics.median(float(r["ups"]) for r in steady), "records": len(steady)}


def table4_sweep(bin_dir: Path, work: Path, env: dict, updates: int, name: str, seed: int, extra=()) -> dict:
    """One timed sweep of table 4's ``PLACEMENTS`` of one seed, one at a time or packed; its cells that ended ok."""
    overrides = PACKED if name.startswith("packed") else ONE_AT_A_TIME
    sweep = work / f"{name}-seed{seed}"
    run = timed([str(bin_dir / "posenc-run"), "-m", "experiment=table4", f"seed={seed}", f"placement={PLACEMENTS}",
                 *(extra or CELL),
                 f"budget.max_update={updates}", *overrides, f"hydra.sweep.dir={sweep}"],
                work, env, work / f"{sweep.name}.log")
    run["cells_ok"] = sum(_status(p) == "ok" for p in sweep.glob("*/result.json"))
    return run


def _status(path: Path):
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError):
        return None


def interleaved(bin_dir: Path, work: Path, env: dict, updates: int, figures, extra=()) -> None:
    """Table 4's cells one at a time and packed, interleaved (seed 1: one at a time, then packed; seed 2:
    packed, then one at a time), so that a drift of the machine falls on both; each sweep written as
    it ends, the ratio once both of a seed's are in."""
    for seed, order in ((1, ("one_at_a_time", "packed")), (2, ("packed", "one_at_a_time"))):
        for name in order:
            figures.put(f"table4_{name}_seed{seed}", table4_sweep(bin_dir, work, env, updates, name, seed, extra))
        one, packed = figures.data[f"table4_one_at_a_time_seed{seed}"], figures.data[f"table4_packed_seed{seed}"]
        if one["exit_status"] == 0 and packed["exit_status"] == 0:
            figures.put(f"table4_wall_ratio_packed_to_one_at_a_time_seed{seed}",
                        round(packed["wall_s"] / one["wall_s"], 3))


def hypothesis_lines(log: Path) -> list:
    """fairseq-generate's S-/T-/H-/D-/P- lines of a generate log, sorted: what it decoded, without timings."""
    if not log.is_file():
        return []
    return sorted(line for line in log.read_text(errors="replace").splitlines() if re.match(r"^[STHDP]-\d+\t", line))


def stock_generate(job_dir: Path, env: dict) -> dict:
    """The cell's own fairseq-generate line from its ``commands.sh`` (not its training line), run again into
    ``generate-test.stock.log``, against what the trainer decoded (``generate-test.log``), byte for byte."""
    lines = (job_dir / "commands.sh").read_text().splitlines()
    keep = [ln for ln in lines if ln.startswith(("#", "set ", "cd ", "export ")) or "> generate-test.log" in ln]
    script = job_dir / "stock-generate.sh"
    script.write_text("\n".join(keep).replace("> generate-test.log", "> generate-test.stock.log") + "\n")
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    trainer = hypothesis_lines(job_dir / "generate-test.log")
    stock = hypothesis_lines(job_dir / "generate-test.stock.log")
    return {"exit_status": proc.returncode, "lines": len(trainer),
            "identical": proc.returncode == 0 and bool(trainer) and trainer == stock}


def warm_and_cold(bin_dir: Path, work: Path, env: dict, updates: int, figures, extra=()) -> None:
    """One cell with the warm trainer and the same cell cold (``runtime.warm_trainer=false``): their
    hypotheses byte for byte; then the warm cell's in-trainer decoding against fairseq-generate's."""
    runs = {}
    for name, flag in (("warm", "true"), ("cold", "false")):
        job = work / f"cell-{name}"
        run = timed([str(bin_dir / "posenc-run"), "experiment=table4", "seed=1", "placement=both", *(extra or CELL),
                     f"budget.max_update={updates}", f"runtime.warm_trainer={flag}", f"hydra.run.dir={job}"],
                    work, env, work / f"cell-{name}.log")
        runs[name] = (run, job)
        figures.put(f"cell_{name}", {**run, "status": _status(job / "result.json")})
    ok = all(run["exit_status"] == 0 for run, _ in runs.values())
    same = ok and all((runs["warm"][1] / f).read_bytes() == (runs["cold"][1] / f).read_bytes()
                      for f in ("hypotheses.txt",) if (runs["warm"][1] / f).is_file())
    figures.put("warm_equals_cold", bool(same and (runs["warm"][1] / "hypotheses.txt").is_file()))
    if ok:
        figures.put("in_trainer_decoding_equals_fairseq_generate", stock_generate(runs["warm"][1], env))


def paper_model(bin_dir: Path, work: Path, env: dict, updates: int, figures, extra=()) -> None:
    """The paper's model for ``updates`` updates, with a step timeout (budget=paper has none: a hang
    would never end); fairseq's own throughput only from a log this run wrote and finished."""
    log = work / "paper" / "train.log"
    log.unlink(missing_ok=True)
    run = timed([str(bin_dir / "posenc-run"), "model=fconv_table4", "budget=paper", *(extra or PAPER),
                 f"budget.max_update={updates}", f"budget.step_timeout_min={PAPER_TIMEOUT_MIN}",
                 f"hydra.run.dir={work / 'paper'}"], work, env, work / "paper.log")
    speed = throughput(log) if run["exit_status"] == 0 and log.is_file() else {"wps": None, "ups": None, "records": 0}
    figures.put("paper_model", {**run, **speed, "updates": updates})


def gpu_check(bin_dir: Path, work: Path, env: dict, updates: int, figures, cpu: bool) -> None:
    out = work / "gpu_check.json"
    out.unlink(missing_ok=True)
    check = timed([str(bin_dir / "python"), str(REPO / "scripts" / "gpu_check.py"), "--max-update", str(updates),
                   "--rounds", "1", "--cache", str(work / "cache"), "--json", str(out),
                   *(["--allow-cpu", "--size", "small"] if cpu else [])], work, env, work / "gpu_check.log")
    check["figures"] = json.loads(out.read_text()) if check["exit_status"] == 0 and out.is_file() else None
    figures.put("gpu_check", check)


def steps(opts, bin_dir: Path, work: Path, env: dict, figures) -> None:
    """Each step in turn, timed, its figures written as it ends; a step that fails leaves its exit status."""
    extra, paper_extra = (CPU_CELL, CPU_PAPER) if opts.cpu else (CELL, PAPER)
    plan = (("gpu_check", lambda: gpu_check(bin_dir, work, env, opts.gpu_check_updates, figures, opts.cpu)),
            ("table4", lambda: interleaved(bin_dir, work, env, opts.table4_updates, figures, extra)),
            ("warm_and_cold", lambda: warm_and_cold(bin_dir, work, env, opts.table4_updates, figures, extra)),
            ("paper_model", lambda: paper_model(bin_dir, work, env, opts.paper_updates, figures, paper_extra)))
    for name, step in plan:
        started = time.monotonic()
        print(f"offline-gpu-check: {name} ...", file=sys.stderr, flush=True)
        step()
        figures.data["steps_s"][name] = round(time.monotonic() - started, 1)
        figures.put("steps_s", figures.data["steps_s"])


def main(argv=None) -> int:
    opts = parse_cli(argv)
    print(f"offline-gpu-check: {NEEDS}", flush=True)
    figures = Figures(opts.out.resolve())
    started = time.monotonic()
    bin_dir = Path(sys.executable).parent if opts.cpu else install(opts.wheelhouse.resolve(), opts.target.resolve())
    figures.data["steps_s"]["install"] = round(time.monotonic() - started, 1)
    figures.put("machine", {**device_of(bin_dir), "cpu_rehearsal": opts.cpu})
    if not figures.data["machine"]["gpu"] and not opts.cpu:
        print("offline-gpu-check: installed, but torch sees no CUDA device; nothing here is meant for a CPU",
              file=sys.stderr)
        return 2
    work = opts.target / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not the checkout
    env.update(POSENC_CACHE=str(work / "cache"), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    steps(opts, bin_dir, work, env, figures)
    figures.data["steps_s"]["all"] = round(time.monotonic() - started, 1)
    figures.put("finished", True)
    print(json.dumps(figures.data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
