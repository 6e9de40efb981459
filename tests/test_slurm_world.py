"""A cell's world size and port are the ones it asked for, whatever SLURM or torchrun variables are
in its environment: fairseq's own ``infer_init_method`` (what ``fairseq-train`` runs first), applied
to the cell's composed training command, under the environment of a one-task SLURM job on a 4-GPU
node, of a bare ``salloc`` shell and of a torchrun worker. No GPU needed: torch's device count is
set to 4, as on such a node. The stock command (the same without the cell's rendezvous) is checked
too, to show what the environment would do to it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_scale_out import after, commands

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")  # conftest.py: compose beside fairseq

SLURM_4_GPU_NODE = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu01", "SLURM_STEP_NODELIST": "gpu01",
                    "SLURM_NNODES": "1", "SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1", "SLURM_NODEID": "0",
                    "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_ARRAY_TASK_ID": "3"}
BARE_SALLOC = {"SLURM_JOB_ID": "4243", "SLURM_JOB_NODELIST": "gpu01", "SLURM_NNODES": "1", "SLURM_NODEID": "0"}
TORCHRUN = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8", "RANK": "3", "LOCAL_RANK": "3"}
ENVIRONMENTS = {"slurm-4-gpu-node": SLURM_4_GPU_NODE, "bare-salloc": BARE_SALLOC, "torchrun": TORCHRUN}
ALL_KEYS = set().union(*ENVIRONMENTS.values())


# In one process of its own (fairseq's config conversion needs Hydra's global state untouched), on a
# "4-GPU node": torch counts 4 devices, scontrol answers as SLURM's does. Each case: the training
# command's arguments and the environment (on top of this process's, without SLURM or torchrun's).
INFER = """
import json, os, sys
import torch
torch.cuda.device_count = lambda: 4
import posenc.trainer.train as entry  # fairseq_cli.train first, as in the real trainer
from fairseq.distributed import utils as distributed_utils
base = dict(os.environ)
out = []
for argv, environment in json.loads(sys.stdin.read()):
    os.environ.clear()
    os.environ.update(base, **environment)
    d, error = entry.parse(argv).distributed_training, None
    try:
        distributed_utils.infer_init_method(d)
    except Exception as err:  # what fairseq-train would die of
        error = type(err).__name__
    out.append({"world_size": d.distributed_world_size, "init_method": d.distributed_init_method,
                "no_spawn": d.distributed_no_spawn, "error": error})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def infer(tmp_path_factory):
    """``infer([[argv, environment], ...])``: fairseq's distributed config after its own inference,
    as fairseq-train would start with each training command's ``argv`` (after the program) under
    each ``environment``; all cases in one process (fairseq's import takes seconds)."""
    fake = tmp_path_factory.mktemp("bin")
    (fake / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && echo "$3"\n')
    (fake / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ALL_KEYS and not k.startswith("SLURM_")}
    env["PATH"] = f"{fake}:{os.environ['PATH']}"

    def run(cases):
        proc = subprocess.run([sys.executable, "-c", INFER], input=json.dumps(cases), env=env, capture_output=True,
                              text=True, timeout=600, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return run


def without_rendezvous(argv):
    i = argv.index("--distributed-init-method")
    return argv[:i] + argv[i + 2:]


def test_two_gpus_asked_for_are_two_on_the_cells_own_port(infer):
    train, _ = commands("gpus=2", "model=fconv_small")
    for where, dist in zip(ENVIRONMENTS, infer([[train[3:], env] for env in ENVIRONMENTS.values()])):
        assert dist["world_size"] == 2, where
        assert dist["init_method"] == after(train, "--distributed-init-method"), where
        port = int(dist["init_method"].rsplit(":", 1)[1])
        assert 1024 < port < 65536 and port != int(TORCHRUN["MASTER_PORT"])
        assert not dist["no_spawn"] and dist["error"] is None, where


def test_what_the_environment_does_to_the_stock_command(infer):
    """Without the cell's rendezvous, fairseq's inference decides: the reason for it."""
    stock = without_rendezvous(commands("gpus=2", "model=fconv_small")[0])[3:]
    slurm, salloc, torchrun = infer([[stock, SLURM_4_GPU_NODE], [stock, BARE_SALLOC], [stock, TORCHRUN]])
    assert slurm["world_size"] == 4  # every GPU of the node: the batch doubles
    assert salloc["error"] == "TypeError"  # int(None): no SLURM_NTASKS* in a bare salloc shell
    # torchrun's world size, and it waits for 7 peers that were never started
    assert torchrun["world_size"] == 8 and torchrun["init_method"] == "env://" and torchrun["no_spawn"]


def test_two_cells_get_two_ports():
    """joblib cells in one allocation: stock fairseq derives one port from SLURM_JOB_ID for both."""
    first, second = (after(commands("gpus=2")[0], "--distributed-init-method") for _ in range(2))
    assert first != second


def test_one_device_never_infers_anything(infer):
    trains = [commands(f"gpus={gpus}")[0] for gpus in (0, 1)]
    assert not any("--distributed-init-method" in train for train in trains)
    for dist in infer([[train[3:], {**SLURM_4_GPU_NODE, **TORCHRUN}] for train in trains]):
        assert dist["world_size"] == 1 and dist["init_method"] is None and dist["error"] is None


def test_the_save_and_stop_hook_wraps_fairseqs_own_function():
    """posenc.trainer.train wraps fairseq_cli.train.validate_and_save; it must still be there, with
    the signature the training loop calls it with (fairseq-fixed 0.12.3.1)."""
    code = ("import inspect, posenc.trainer.train as e; from fairseq_cli import train; "
            "print(list(inspect.signature(e._STOCK_VALIDATE_AND_SAVE).parameters), "
            "'validate_and_save(' in inspect.getsource(train.train))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == \
        "['cfg', 'trainer', 'task', 'epoch_itr', 'valid_subsets', 'end_of_epoch'] True", proc.stderr[-2000:]
