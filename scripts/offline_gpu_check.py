#!/usr/bin/env python3
"""The GPU check of a bare, offline machine, from a wheelhouse (``make wheelhouse``), in one go:

1. install: a fresh venv at ``--target`` made with ``--system-site-packages`` (the machine's own
   CUDA torch is used and never reinstalled), then ``pip install --no-index --find-links
   WHEELHOUSE posenc``: nothing from a network;
2. ``make gpu-check`` (``scripts/gpu_check.py``: stock fairseq against the plugin, bf16), shortened
   to ``--gpu-check-updates`` updates and one round;
3. the main job's 12 cells (``experiment=table4``, fp16, ``budget.max_update=--table4-updates``)
   packed on the GPU (``PACKED``) against one at a time (``ONE_AT_A_TIME``): wall time of each
   sweep and their ratio, peak GPU memory and mean GPU use (``nvidia-smi``, sampled twice a second);
4. the paper's model (``model=fconv_table4 budget=paper``, fp16) for ``--paper-updates`` updates:
   fairseq's own words/s and updates/s (medians of its ``train_inner`` records after the first),
   peak GPU memory.

Every figure goes to ``--out`` (JSON) as it is measured; about 6-7 minutes on one H200 (an
estimate: not yet run on one). Run it with the Python that has the machine's torch, from a
checkout of this repository: ``posenc-run`` is the installed wheel's (``PYTHONPATH`` is dropped),
while ``scripts/gpu_check.py`` runs from the checkout, as ``make gpu-check`` does:

    python3 scripts/offline_gpu_check.py WHEELHOUSE [--target /tmp/posenc-offline] [--out gpu-figures.json]

Without a CUDA device it stops with one line (exit status 2) after the install.
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
# How cells share a GPU (runtime.cells_per_gpu, docs/clusters.md#several-cells-on-one-gpu); one place to change it.
PACKED = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=12", "runtime.cells_per_gpu=auto"]
ONE_AT_A_TIME = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=1", "runtime.cells_per_gpu=1"]
_TRAIN_INNER = re.compile(r"\| train_inner \| (\{.*\})\s*$")


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheelhouse", type=Path)
    p.add_argument("--target", type=Path, default=Path("/tmp/posenc-offline"), help="the fresh venv (replaced)")
    p.add_argument("--out", type=Path, default=Path("gpu-figures.json"))
    p.add_argument("--gpu-check-updates", type=int, default=100)
    p.add_argument("--table4-updates", type=int, default=100)
    p.add_argument("--paper-updates", type=int, default=400)
    return p.parse_args(argv)


class Figures:
    """The JSON of figures, rewritten whole after each step (a check cut short keeps what it measured)."""

    def __init__(self, path: Path):
        self.path, self.data = path, {"python": platform.python_version(), "steps_s": {}}

    def put(self, key: str, value) -> None:
        self.data[key] = value
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n")
        os.replace(tmp, self.path)


def install(wheelhouse: Path, target: Path) -> Path:
    """A fresh venv over the machine's site-packages, with posenc from the wheelhouse alone."""
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit(f"offline-gpu-check: {sys.executable} has no torch; run this with the Python that has the "
                 "machine's CUDA torch (the wheelhouse leaves torch out)")
    if not any(wheelhouse.glob("posenc-*.whl")):
        sys.exit(f"offline-gpu-check: {wheelhouse} holds no posenc wheel; make one with make wheelhouse")
    shutil.rmtree(target, ignore_errors=True)
    must([sys.executable, "-m", "venv", "--system-site-packages", str(target)], "making the venv")
    must([str(target / "bin" / "python"), "-c", "import torch"], "torch from the venv (a venv made from another "
         "venv sees its base Python's packages, not that venv's; run this with the Python that holds torch)")
    must([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
          "posenc"], f"installing from {wheelhouse}")
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


def table4(bin_dir: Path, work: Path, env: dict, updates: int) -> dict:
    base = [str(bin_dir / "posenc-run"), "-m", "experiment=table4", "precision=fp16", f"budget.max_update={updates}"]
    warm = timed([str(bin_dir / "posenc-run"), "experiment=table4", "budget=smoke", f"hydra.run.dir={work / 'warm'}"],
                 work, env, work / "warm.log")  # the corpus binarized once, before either sweep is timed
    sweeps = {name: timed([*base, *overrides, f"hydra.sweep.dir={work / name}"], work, env, work / f"{name}.log")
              for name, overrides in (("one_at_a_time", ONE_AT_A_TIME), ("packed", PACKED))}
    for name, sweep in sweeps.items():
        sweep["cells_ok"] = sum(json.loads(p.read_text()).get("status") == "ok"
                                for p in (work / name).glob("*/result.json"))
    ratio = sweeps["packed"]["wall_s"] / sweeps["one_at_a_time"]["wall_s"]
    return {"updates": updates, "warm_up": warm, "packed_overrides": PACKED, "one_at_a_time_overrides": ONE_AT_A_TIME,
            **sweeps, "wall_ratio_packed_to_one_at_a_time": round(ratio, 3)}


def main(argv=None) -> int:
    opts = parse_cli(argv)
    figures = Figures(opts.out.resolve())
    started = time.monotonic()
    bin_dir = install(opts.wheelhouse.resolve(), opts.target.resolve())
    figures.data["steps_s"]["install"] = round(time.monotonic() - started, 1)
    figures.put("machine", device_of(bin_dir))
    if not figures.data["machine"]["gpu"]:
        print("offline-gpu-check: installed, but torch sees no CUDA device; nothing here is meant for a CPU",
              file=sys.stderr)
        return 2
    work = opts.target / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not the checkout
    env.update(POSENC_CACHE=str(work / "cache"), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    step = time.monotonic()
    check = timed([str(bin_dir / "python"), str(REPO / "scripts" / "gpu_check.py"), "--max-update",
                   str(opts.gpu_check_updates), "--rounds", "1", "--cache", str(work / "cache"),
                   "--json", str(work / "gpu_check.json")], work, env, work / "gpu_check.log")
    check["figures"] = json.loads((work / "gpu_check.json").read_text()) if check["exit_status"] == 0 else None
    figures.data["steps_s"]["gpu_check"] = round(time.monotonic() - step, 1)
    figures.put("gpu_check", check)
    step = time.monotonic()
    figures.put("table4", table4(bin_dir, work, env, opts.table4_updates))
    figures.data["steps_s"]["table4"] = round(time.monotonic() - step, 1)
    step = time.monotonic()
    paper = timed([str(bin_dir / "posenc-run"), "model=fconv_table4", "budget=paper", "precision=fp16",
                   f"budget.max_update={opts.paper_updates}", f"hydra.run.dir={work / 'paper'}"],
                  work, env, work / "paper.log")
    figures.data["steps_s"]["paper_model"] = round(time.monotonic() - step, 1)
    figures.put("paper_model", {**paper, **throughput(work / "paper" / "train.log"), "updates": opts.paper_updates})
    figures.data["steps_s"]["all"] = round(time.monotonic() - started, 1)
    figures.put("finished", True)
    print(json.dumps(figures.data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
