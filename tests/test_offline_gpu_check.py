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
