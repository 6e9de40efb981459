"""``make gpu-check`` without a GPU: one line and a non-zero exit; and its three runs are the same
fairseq training but for the position flags, in bf16 on the GPU (not a TPU)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_stops_with_one_line():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU for torch, on any machine
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpu-check: no CUDA device: torch ")


RESOLVE = """
import json, sys
import posenc.trainer.train as entry
out = {}
for name, argv in json.loads(sys.argv[1]).items():
    cfg = entry.parse(argv)
    out[name] = {"model": {k: str(v) for k, v in vars(cfg.model).items()}, "bf16": cfg.common.bf16,
                 "tpu": cfg.common.tpu, "world": cfg.distributed_training.distributed_world_size}
print(json.dumps(out))
"""


def test_the_three_runs_differ_in_their_position_flags_only():
    gpu_check = load_script()
    opts = gpu_check.parse_cli([])
    argvs = {name: gpu_check.variant_argv(name, opts, "data-bin", "NVIDIA H100") for name in gpu_check.VARIANTS}
    proc = subprocess.run([sys.executable, "-c", RESOLVE, json.dumps(argvs)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = json.loads(proc.stdout.strip().splitlines()[-1])
    for run in resolved.values():
        assert run["bf16"] and not run["tpu"] and run["world"] == 1
    stock, sinusoidal, rope = (resolved[n]["model"] for n in ("stock", "sinusoidal", "rope"))
    assert stock["arch"] == "transformer_iwslt_de_en"
    assert sinusoidal["arch"] == rope["arch"] == "posenc_transformer_iwslt_de_en"
    assert (stock["encoder_embed_dim"], stock["encoder_ffn_embed_dim"], stock["encoder_layers"],
            stock["encoder_attention_heads"], stock["decoder_layers"]) == ("512", "1024", "6", "4", "6")
    assert (rope["encoder_pos"], rope["decoder_pos"]) == ("rope", "rope")
    assert (sinusoidal["encoder_pos"], sinusoidal["decoder_pos"]) == ("sinusoidal", "sinusoidal")
    from posenc.kinds import position_settings

    ours = {"arch", "_name", *position_settings()}
    for other in (sinusoidal, rope):
        assert {k: v for k, v in other.items() if k not in ours} == {k: v for k, v in stock.items() if k not in ours}
