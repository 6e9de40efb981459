"""The wheelhouse and the offline GPU check without a GPU or a network: the torch stand-in that keeps
torch out of the wheelhouse is a wheel pip installs as torch; the figures read from nvidia-smi's
samples and fairseq's log; and the check run offline on a machine without a GPU ends in one line.
(The wheelhouse itself needs the registry; docs/clusters.md says how it was checked.)"""

import importlib.util
import json
import subprocess
import sys
import time
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


def test_the_check_fits_in_8_minutes_by_the_projects_h200_figures_and_ends_within_10():
    """Each step's time on one H200 from results/h200_synthetic.md's figures (``H200``), at the
    default sizes; every step is cut at what is left of the budget, and its kill takes at most 40 s."""
    check = load("offline_gpu_check")
    plan = check.plan(check.parse_cli(["wheelhouse"]))
    assert [step.name for step in check.STEPS] == [name for name in plan if name != "install"]
    assert sum(plan.values()) <= 8 * 60, plan
    assert check.BUDGET_S + 40 <= 10 * 60


def test_a_hung_step_is_stopped_at_its_time_limit(tmp_path):
    check = load("offline_gpu_check")
    started = time.monotonic()
    result = check.timed([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(120)"],
                         tmp_path, None, tmp_path / "hung.log", timeout_s=2)
    assert result["timed_out"] and not check.passed(result) and time.monotonic() - started < 30
    assert (tmp_path / "hung.log").read_text() == "started\n"


def fake_bin(folder: Path, status: int) -> Path:
    """A ``python`` and a ``posenc-run`` that print a line and exit with ``status``, writing nothing else."""
    folder.mkdir()
    for name in ("python", "posenc-run"):
        (folder / name).write_text(f"#!/bin/sh\necho 'Traceback: it broke'\nexit {status}\n")
        (folder / name).chmod(0o755)
    return folder


def a_check(check, tmp_path, bin_dir, deadline=None):
    work = tmp_path / "work"
    work.mkdir()
    opts = check.parse_cli(["wheelhouse"])
    return check.Check(opts, check.GPU, bin_dir, work, {"PATH": "/usr/bin:/bin"},
                       check.Figures(tmp_path / "figures.json", check.GPU), deadline)


def test_a_failed_steps_figures_are_never_read_from_a_log_it_did_not_write(tmp_path):
    """The paper model's step failed before fairseq wrote its train.log (the old check read it
    regardless, and stopped with a traceback), and gpu_check.py failed before writing its JSON."""
    check = load("offline_gpu_check")
    run = a_check(check, tmp_path, fake_bin(tmp_path / "bin", 1))
    paper = check.paper_model_step(run, timeout_s=60)
    assert not paper["passed"] and paper["exit_status"] == 1 and paper["wps"] is None and paper["cells"] == []
    assert f"budget.step_timeout_min={check.PAPER_STEP_TIMEOUT_MIN}" in paper["overrides"]  # budget=paper has none
    (run.work / "gpu_check.json").write_text('{"stale": "from an earlier run"}')
    gpu = check.gpu_check_step(run, timeout_s=60)
    assert not check.passed(gpu) and gpu["figures"] is None and not (run.work / "gpu_check.json").exists()


def test_each_steps_figures_are_on_disk_as_it_ends_and_a_step_that_cannot_run_says_why(tmp_path):
    check = load("offline_gpu_check")
    run = a_check(check, tmp_path, tmp_path, deadline=time.monotonic() + 50)
    seen = []

    def first(c, timeout_s):
        return {"exit_status": 0, "timed_out": False, "figure": 7}

    def second(c, timeout_s):  # the file holds the first step's figures before the second starts
        seen.append(json.loads((tmp_path / "figures.json").read_text())["first"]["figure"])
        return {"exit_status": 1, "timed_out": False}

    steps = [check.Step("first", first), check.Step("second", second), check.Step("third", first, needs=("second",)),
             check.Step("long", first), check.Step("unwanted", first, when=lambda c: False)]
    failed = check.run_steps(run, steps, {"first": 1, "second": 1, "third": 1, "long": 3600, "unwanted": 1})
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert seen == [7] and failed == ["second", "third", "long"]
    assert figures["first"]["passed"] and not figures["second"]["passed"]
    assert figures["third"]["skipped"] == "needs second, which did not pass"
    assert figures["long"]["skipped"].endswith("left of the 540 s budget; the step takes about 3600 s on one H200")
    assert "unwanted" not in figures


def test_the_machines_python_is_refused_in_one_line_naming_what_it_lacks():
    check = load("offline_gpu_check")
    cuda = {"version": "2.11.0+cu130", "cuda": "13.0"}
    assert check.refusal(cuda, in_venv=False, has_venv=True) == ""
    assert "is a venv's Python" in check.refusal(cuda, in_venv=True, has_venv=True)
    assert check.refusal({}, False, True).endswith("has no torch")
    assert check.refusal({"version": "2.10.1+cu128", "cuda": "12.8"}, False, True).endswith("has torch 2.10.1+cu128")
    assert "a build without CUDA" in check.refusal({"version": "2.11.0+cpu", "cuda": None}, False, True)
    assert "cannot make a venv" in check.refusal(cuda, False, has_venv=False)
    assert "torch >= 2.11" in check.needs() and "outside any venv" in check.needs()


def test_the_wheelhouses_requirements_on_torch_are_read_from_its_wheels(tmp_path):
    check = load("offline_gpu_check")
    for name, requires in (("torchaudio-2.11.1-cp312-cp312-manylinux_2_28_x86_64.whl", ["torch==2.11.0"]),
                           ("posenc-0.1.0-py3-none-any.whl", ["torch<2.15,>=2.1", "torch-fidelity; extra == 'x'"])):
        with zipfile.ZipFile(tmp_path / name, "w") as wheel:
            meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
            wheel.writestr(f"{name.split('-')[0]}-{name.split('-')[1]}.dist-info/METADATA", f"Name: x\n{meta}")
    assert check.torch_requirements(tmp_path) == ["posenc 0.1.0: torch<2.15,>=2.1", "torchaudio 2.11.1: torch==2.11.0"]
