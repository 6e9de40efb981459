"""The wheelhouse and the offline GPU check without a GPU or a network: the torch stand-in that keeps
torch out of the wheelhouse is a wheel pip installs as torch; the figures read from nvidia-smi's
samples and fairseq's log; and the check run offline on a machine without a GPU ends in one line.
(The wheelhouse itself needs the registry; docs/clusters.md says how it was checked.)"""

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_torch_stand_in_installs_as_torch_and_holds_no_code(tmp_path):
    wheelhouse = load("wheelhouse")
    wheel = wheelhouse.stand_in_wheel(tmp_path, "2.11.0")
    assert all(name.startswith("torch-2.11.0+posenc.stand.in.dist-info/") for name in zipfile.ZipFile(wheel).namelist())
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--find-links",
                           str(tmp_path), "--target", str(target), "torch==2.11.0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    metadata = (target / "torch-2.11.0+posenc.stand.in.dist-info" / "METADATA").read_text()
    assert "Name: torch\nVersion: 2.11.0+posenc.stand.in" in metadata
    assert not (target / "torch").exists()


def test_gpu_samples_give_the_peak_memory_and_the_mean_use():
    check = load("offline_gpu_check")
    rows = ["1024, 10\n", "4096, 90\n", "[N/A], [N/A]\n", "2048, 50\n"]
    assert check.summarize_samples(rows) == {"peak_memory_mib": 4096.0, "mean_use_pct": 50.0, "samples": 3}
    assert check.summarize_samples([])["peak_memory_mib"] is None


def test_throughput_is_fairseqs_own_after_its_first_record(tmp_path):
    check = load("offline_gpu_check")
    log = tmp_path / "train.log"
    records = [{"wps": "1000", "ups": "1"}, {"wps": "60000", "ups": "16"}, {"wps": "70000", "ups": "18"},
               {"wps": "65000", "ups": "17.5"}]
    log.write_text("".join(f"2026-12-04 17:00:00 | INFO | train_inner | {json.dumps(r)}\n" for r in records)
                   + "2026-12-04 17:00:01 | INFO | train | {\"wps\": \"5\"}\n")
    assert check.throughput(log) == {"wps": 65000.0, "ups": 17.5, "records": 3}


def test_without_torch_in_the_machines_python_the_check_stops_in_one_line(tmp_path):
    """Run by a Python without torch (the venv it makes sees no torch): one line, before any install."""
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("this machine's system Python has torch")
    proc = subprocess.run([python, str(REPO / "scripts" / "offline_gpu_check.py"), str(tmp_path / "wheels"),
                           "--target", str(tmp_path / "venv"), "--out", str(tmp_path / "figures.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith("offline-gpu-check: ") and "has no torch" in proc.stderr


def fake_steps(check, tmp_path, monkeypatch, fail=()):
    """``timed`` faked: each command "runs" (exit 1 for names in ``fail``), and what the figures file
    held when it started is kept, to show each figure was on disk before the next step began."""
    seen = []

    def timed(argv, cwd, env, log):
        seen.append((log.name, json.loads((tmp_path / "figures.json").read_text())))
        return {"wall_s": 10.0 if "packed" in log.name else 20.0, "exit_status": 1 if log.stem in fail else 0,
                "peak_memory_mib": None, "mean_use_pct": None, "samples": 0, "log": str(log)}

    monkeypatch.setattr(check, "timed", timed)
    monkeypatch.setattr(check, "stock_generate", lambda job, env: {"identical": True})
    return seen


def test_each_figure_is_on_disk_before_the_next_step_and_runs_interleave(tmp_path, monkeypatch):
    check = load("offline_gpu_check")
    seen = fake_steps(check, tmp_path, monkeypatch, fail={"paper"})
    figures = check.Figures(tmp_path / "figures.json")
    figures.put("machine", {"gpu": "faked"})
    opts = check.parse_cli(["wheels", "--cpu"])
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "train.log").write_text("an earlier run's log, never read\n")
    check.steps(opts, tmp_path, tmp_path, {}, figures)
    order = [name for name, _ in seen]
    assert order == ["gpu_check.log", "one_at_a_time-seed1.log", "packed-seed1.log", "packed-seed2.log",
                     "one_at_a_time-seed2.log", "cell-warm.log", "cell-cold.log", "paper.log"]
    before = dict(seen)
    assert "gpu_check" in before["one_at_a_time-seed1.log"]
    assert "table4_one_at_a_time_seed1" in before["packed-seed1.log"]
    assert "table4_wall_ratio_packed_to_one_at_a_time_seed1" in before["packed-seed2.log"]
    assert "steps_s" in before["cell-warm.log"] and before["cell-warm.log"]["steps_s"]["table4"] >= 0
    done = json.loads((tmp_path / "figures.json").read_text())
    assert done["table4_wall_ratio_packed_to_one_at_a_time_seed2"] == 0.5
    assert done["paper_model"]["exit_status"] == 1 and done["paper_model"]["wps"] is None  # its old log unread
    assert done["gpu_check"]["figures"] is None  # exit 0, but no JSON written: none read


def test_the_paper_step_has_a_timeout_and_cpu_mode_fits_a_cpu(tmp_path, monkeypatch):
    check = load("offline_gpu_check")
    argvs = []
    monkeypatch.setattr(check, "timed", lambda argv, cwd, env, log: argvs.append(argv) or {"exit_status": 0})
    check.paper_model(tmp_path, tmp_path, {}, 200, check.Figures(tmp_path / "f.json"), check.CPU_PAPER)
    assert f"budget.step_timeout_min={check.PAPER_TIMEOUT_MIN}" in argvs[0] and check.PAPER_TIMEOUT_MIN > 0
    assert "gpus=0" in argvs[0] and "budget=paper" in argvs[0]


def test_the_torch_the_node_needs_is_said_and_checked():
    check = load("offline_gpu_check")
    assert "CUDA build of torch >= 2.11" in check.NEEDS and "outside any venv" in check.NEEDS and "venv" in check.NEEDS
    assert check.torch_refusal("py", "2.11.0+cu130 13.0") == ""
    assert check.torch_refusal("py", "2.5.1+cu124 12.4") == "py has torch 2.5.1+cu124, older than 2.11"
    assert check.torch_refusal("py", "2.11.0+cpu None") == "py has torch 2.11.0+cpu built without CUDA"


def test_in_trainer_decoding_is_compared_with_the_cells_own_fairseq_generate_line(tmp_path):
    """The generate line of commands.sh runs again (not the training line); S/H/D lines compared, timings not."""
    check = load("offline_gpu_check")
    decoded = "S-0\tx y\nH-0\t-0.1\ty x\nD-0\t-0.1\ty x\n"
    (tmp_path / "generate-test.log").write_text("2026 | INFO | Translated 1 sentences in 0.5s\n" + decoded)
    script = ["#!/usr/bin/env bash", "set -euo pipefail", f"cd {tmp_path}", "export A=1", "exit 7",
              "printf '" + decoded.replace("\t", "\\t").replace("\n", "\\n") + "Done in 9s\\n' > generate-test.log"]
    (tmp_path / "commands.sh").write_text("\n".join(script).replace("exit 7", "false # training line") + "\n")
    assert check.stock_generate(tmp_path, {}) == {"exit_status": 0, "lines": 3, "identical": True}
    (tmp_path / "generate-test.log").write_text(decoded.replace("y x", "x y"))
    assert check.stock_generate(tmp_path, {})["identical"] is False
