"""The machine as provenance records it (its CPU and GPUs), read without torch in the harness."""

import os
import subprocess

from posenc.harness import machine
from posenc.harness.run.provenance import provenance

SMI = "GPU 0: NVIDIA H200 (UUID: GPU-1f7c0e4a-0000-0000-0000-00000000)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-2)\n"


def fake_smi(tmp_path, monkeypatch, text=SMI):
    (tmp_path / "nvidia-smi").write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '%s' '{text}'\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_gpus_by_name_from_nvidia_smi(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)
    assert machine.gpu_names() == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]


def test_provenance_keeps_the_cpu_model_and_the_gpus_beside_the_versions(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch)
    kept = provenance()
    assert kept["machine"]["gpus"] == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]
    assert kept["machine"]["cores"] == os.cpu_count() and kept["packages"]["torch"]
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout  # an outside reader of the same CPU
    model = [line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")]
    assert kept["machine"]["cpu"] == (model[0] if model else machine.cpu_model())


def test_no_nvidia_smi_no_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert machine.gpu_names() == [] and machine.describe()["gpus"] == []
