# posenc: set-up, tests and the main job. See README.md.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# torch goes in first, from TORCH_SPEC, so that the project's own `torch` requirement never picks a
# build. Which build pip's index serves decides what that is: on x86-64 Linux the public PyPI
# serves the multi-GB CUDA build (this machine keeps a CPU build of torch 2.13.0 on disk instead).
# TORCH_INDEX=https://download.pytorch.org/whl/cpu takes it from PyTorch's CPU index. GPU users
# install their CUDA torch into .venv first (see README): a torch that already imports is kept.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
STAMP  := $(VENV)/.posenc-installed

.PHONY: setup test test-fast lint table4 bench gpu-check wheelhouse offline-gpu-check clean-venv slurm-up slurm-down slurm-status

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || \
		$(PIP) install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(PIP) install -q -e ".[test]"
	@touch $(STAMP)

# Three pytest workers, each taking whole files (--dist loadfile keeps a file's module fixtures, the
# sweeps its tests share, on one worker). Every child the suite starts trains on one thread
# (tests/conftest.py), and the tests wait on their children, the SLURM ones on the scheduler: on 2
# cores a third worker fills what two leave idle (22 min 33 s against 27 min 38 s with two in
# xdist's order, results/benchmarks.md). The files go out longest first, in tests/conftest.py's order
# (--no-loadscope-reorder: xdist would reorder them by their number of tests and start the few long
# ones last). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The suite without the slow end-to-end tests (for quick iteration; CI runs everything).
test-fast: setup
	$(PY) -m pytest -m "not slow"

# ruff over the whole repository; its rules and the reasons for the few it ignores are in pyproject.toml.
lint: setup
	$(VENV)/bin/ruff check .

# The main job. Finished cells are kept: a rerun resumes the sweep, or just prints its table.
# (The sweep ends with its compact table, then the path of results/table4/table.md, which keeps every
# table and note; posenc-table results/table4 prints them all.)
# Two cells at a time (Hydra's joblib launcher, one thread each), which beat one cell at a time with
# two threads on a 2-core machine; the main job took 2 min 48 s there (results/benchmarks.md, "A cell's
# start paid once per slot").
# TABLE4_ARGS replaces these overrides, e.g. make table4 TABLE4_ARGS= (one cell at a time).
TABLE4_ARGS ?= hydra/launcher=joblib hydra.launcher.n_jobs=2
table4: setup
	$(VENV)/bin/posenc-run -m experiment=table4 $(TABLE4_ARGS)

bench: setup
	$(PY) scripts/bench_plugin.py

# Speed and memory of the plugin against stock fairseq on a CUDA GPU (bf16); one line and exit
# status 2 on a machine without one.
gpu-check: setup
	$(PY) scripts/gpu_check.py

# For an offline GPU node (docs/clusters.md): every wheel the project needs for Python PYVER, torch
# aside (the node brings its own; TORCH_VERSION, the node's, picks torchaudio), into WHEELHOUSE.
# On the node, with the Python that has its torch (a CUDA build >= 2.11, outside any venv, with its venv
# module): make offline-gpu-check WHEELHOUSE=... PYTHON=python3 (under 8 minutes by results/h200_synthetic.md)
PYVER ?= 3.12
TORCH_VERSION ?= 2.11.0
WHEELHOUSE ?= wheelhouse-py$(PYVER)
wheelhouse: setup
	$(PY) scripts/wheelhouse.py --python-version $(PYVER) --torch $(TORCH_VERSION) --out $(WHEELHOUSE)

offline-gpu-check:
	$(PYTHON) scripts/offline_gpu_check.py $(WHEELHOUSE) --out gpu-figures.json

# A single-node SLURM on this machine (Debian/Ubuntu, as root) for the slurm preset and the tests
# marked slurm: installs slurm-wlm and munge (and MariaDB + slurmdbd for accounting) when absent.
slurm-up:
	scripts/slurm_local.sh up
slurm-down:
	scripts/slurm_local.sh down
slurm-status:
	scripts/slurm_local.sh status

clean-venv:
	rm -rf $(VENV)
