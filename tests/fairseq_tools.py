"""Running fairseq's own command-line tools from tests, as users run them."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "posenc" / "fairseq_plugin"
BIN = Path(sys.executable).parent


def fairseq(tool, *args, cwd, check=True):
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(BIN / tool), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{tool} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def train(data, save_dir, arch, *extra, cwd, user_dir=PLUGIN):
    return fairseq("fairseq-train", data, "--user-dir", user_dir, "--arch", arch, *extra,
                   "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400", "--max-update", "3",
                   "--save-dir", save_dir, "--no-epoch-checkpoints", "--no-progress-bar", "--cpu",
                   "--seed", "1", "--required-batch-size-multiple", "1", "--num-workers", "0", cwd=cwd)
