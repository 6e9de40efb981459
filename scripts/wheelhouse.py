#!/usr/bin/env python
"""``make wheelhouse PYVER=3.12``: every wheel the project needs on a Linux x86-64 machine with
that Python, torch aside (a GPU machine brings its own CUDA build), gathered while there is a
network, so that an offline GPU node installs from a folder (docs/clusters.md, "An offline GPU
node: the wheelhouse").

- The project's own wheel (``pip wheel --no-deps .``).
- Source-only dependencies built into wheels here: ``antlr4-python3-runtime`` 4.9.3 (Hydra's and
  OmegaConf's parser runtime; pure Python, so the wheel built here serves any Python 3).
- Everything else as the registry's binary wheels for that Python and platform
  (``pip download --only-binary=:all: --python-version ... --platform manylinux_2_28_x86_64``,
  manylinux2014 and pure ``any`` wheels too), resolved by pip from the project's wheel.

torch is kept out by a stand-in: a metadata-only ``torch`` wheel at ``--torch`` (a local version,
``+posenc.stand.in``, which pip prefers and which no index has) satisfies every ``torch``
requirement during the resolution and is deleted afterwards. ``--torch`` should be the GPU
machine's torch version, since a few dependencies (torchaudio) pick their own version from it.

Then ``python -m pip install --no-index --find-links WHEELHOUSE posenc`` into a venv made with
``--system-site-packages`` (the machine's torch) needs nothing from a network; the offline check
(``scripts/offline_gpu_check.py``) does exactly that.
"""

import argparse
import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILT_HERE = ["antlr4-python3-runtime==4.9.3"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
STAND_IN = "posenc.stand.in"  # the local version label of the torch stand-in
NOT_GATHERED = ("torch",)


def stand_in_wheel(folder: Path, version: str) -> Path:
    """A ``torch`` wheel holding only its metadata (no code), to keep torch out of the resolution."""
    name = f"torch-{version}+{STAND_IN}"
    dist = f"{name}.dist-info"
    files = {f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}+{STAND_IN}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: posenc\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={_digest(text)},{len(text.encode())}\n" for path, text in files.items())
    path = folder / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in {**files, f"{dist}/RECORD": record + f"{dist}/RECORD,,\n"}.items():
            wheel.writestr(member, text)
    return path


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def pip(*args) -> None:
    argv = [sys.executable, "-m", "pip", *args]
    print("+ " + " ".join(argv), flush=True)
    if subprocess.run(argv).returncode != 0:
        sys.exit(f"wheelhouse: pip {args[0]} failed (above)")


def gather(out: Path, python_version: str, torch_version: str) -> list:
    out.mkdir(parents=True, exist_ok=True)
    pip("wheel", "--no-deps", "-q", "-w", str(out), str(REPO))
    pip("wheel", "--no-deps", "-q", "-w", str(out), *BUILT_HERE)
    project = max(out.glob("posenc-*.whl"), key=lambda p: p.stat().st_mtime)
    with tempfile.TemporaryDirectory() as stub_dir:
        stub = stand_in_wheel(Path(stub_dir), torch_version)
        target = [f"--python-version={python_version}", "--implementation=cp",
                  f"--abi=cp{python_version.replace('.', '')}", *(f"--platform={p}" for p in PLATFORMS)]
        pip("download", "--only-binary=:all:", *target, "-d", str(out), "--find-links", str(out),
            "--find-links", stub_dir, str(project), f"torch=={torch_version}+{STAND_IN}")
        (out / stub.name).unlink(missing_ok=True)
    wheels = sorted(p.name for p in out.glob("*.whl"))
    leaked = [w for w in wheels if w.split("-")[0].lower() in NOT_GATHERED]
    if leaked:
        sys.exit(f"wheelhouse: {', '.join(leaked)} should not be in {out}: the machine brings its own torch")
    return wheels


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", default="3.12", help="the offline machine's Python (default 3.12)")
    parser.add_argument("--torch", default="2.11.0", help="the offline machine's torch version (default 2.11.0)")
    parser.add_argument("--out", help="the wheelhouse folder (default wheelhouse-py<VERSION>)")
    args = parser.parse_args(argv)
    out = Path(args.out or f"wheelhouse-py{args.python_version}").resolve()
    wheels = gather(out, args.python_version, args.torch)
    size = sum((out / w).stat().st_size for w in wheels) / 2**20
    print(f"wheelhouse: {len(wheels)} wheels, {size:.0f} MiB, in {out} (Python {args.python_version}, "
          f"without torch: the machine's own torch {args.torch} or newer is used)")


if __name__ == "__main__":
    main()
