#!/usr/bin/env python
"""``make gpu-check``: training speed and peak GPU memory of the plugin against stock fairseq, in bf16.

One short training run of the IWSLT-size Transformer (``transformer_iwslt_de_en``: 6+6 layers,
512 wide, 1024 FFN, 4 heads) on the embedded synthetic corpus, three ways on the same flags:

  stock       fairseq's own ``transformer_iwslt_de_en``
  sinusoidal  ``posenc_transformer_iwslt_de_en --encoder-pos sinusoidal --decoder-pos sinusoidal``
  rope        ``posenc_transformer_iwslt_de_en --encoder-pos rope --decoder-pos rope``

All three train through ``python -m posenc.trainer.train`` (fairseq-train, except that ``--bf16``
runs on the GPU rather than asking for a TPU; fairseq #4696), with ``--bf16``, one GPU, no
validation and no checkpoints. Words/s is the median of fairseq's own ``wps`` over the
``train_inner`` records after the first (CUDA start-up and allocator warm-up); peak memory is
``torch.cuda.max_memory_allocated()`` over the run. The variants run in alternating order over
``--rounds`` rounds (stock, sinusoidal, rope; then rope, sinusoidal, stock; ...), and the ratios
against stock are taken side by side from this one run. About 3-4 minutes on one GPU.

Without a CUDA device it stops with one line (exit status 2): nothing here is meant for a CPU.
``--allow-cpu`` (for this project's tests only) runs the same code on the CPU.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VARIANTS = {
    "stock": ["--arch", "{stock}"],
    "sinusoidal": ["--arch", "posenc_{stock}", "--encoder-pos", "sinusoidal", "--decoder-pos", "sinusoidal"],
    "rope": ["--arch", "posenc_{stock}", "--encoder-pos", "rope", "--decoder-pos", "rope"],
}
SIZES = {"iwslt": "transformer_iwslt_de_en", "small": "transformer"}  # small: tests only, with size flags below
SMALL_FLAGS = ["--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--encoder-layers", "1",
               "--encoder-attention-heads", "2", "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128",
               "--decoder-layers", "1", "--decoder-attention-heads", "2"]

# Runs in a child per variant: fairseq's training, then the peak memory of that process.
CHILD = """
import json, sys
import posenc.trainer.train as entry
import torch
from fairseq.distributed import utils as distributed_utils
cfg = entry.parse(sys.argv[1:])
cuda = torch.cuda.is_available() and not cfg.common.cpu
if cuda:
    torch.cuda.reset_peak_memory_stats()
distributed_utils.call_main(cfg, entry.train.main)
print("GPU_CHECK " + json.dumps({"peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                                 "device": torch.cuda.get_device_name(0) if cuda else "cpu"}), flush=True)
"""


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-update", type=int, default=300, help="updates per run")
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--log-interval", type=int, default=25, help="updates per fairseq wps record")
    p.add_argument("--rounds", type=int, default=2, help="each variant runs once per round, in alternating order")
    p.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--size", choices=list(SIZES), default="iwslt", help=argparse.SUPPRESS)
    p.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", action="append", default=[], help=argparse.SUPPRESS)  # tests: a smaller corpus
    p.add_argument("--cache", default=os.environ.get("POSENC_CACHE", str(REPO / ".posenc_cache")))
    p.add_argument("--json", help="also write the figures to this JSON file")
    return p.parse_args(argv)


def cuda_or_stop(allow_cpu: bool) -> str:
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    if allow_cpu:
        return "cpu"
    print(f"gpu-check: no CUDA device: torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'}) sees "
          "no GPU; run it on a machine with an NVIDIA GPU and a CUDA build of torch", file=sys.stderr)
    sys.exit(2)


def synthetic_corpus(cache: str, overrides=()):
    from hydra import compose, initialize_config_dir

    from posenc.cells.keys import register_resolver
    from posenc.corpora import prepare_corpus
    register_resolver()  # conf/config.yaml names ${posenc_keys:...}
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        data = compose(config_name="config", overrides=["data=synthetic", *overrides]).data
    return prepare_corpus(data, Path(cache), log=lambda msg: print(f"gpu-check: {msg}", flush=True))


def variant_argv(name, opts, bin_dir, device) -> list:
    stock = SIZES[opts.size]
    argv = [str(bin_dir), "--user-dir", str(REPO / "posenc" / "fairseq_plugin"), "--task", "translation",
            *[a.format(stock=stock) for a in VARIANTS[name]], *(SMALL_FLAGS if opts.size == "small" else []),
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "0.0005", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "100", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
            "--dropout", "0.1", "--max-tokens", str(opts.max_tokens), "--max-update", str(opts.max_update),
            "--required-batch-size-multiple", "1", "--seed", "1", "--num-workers", "2",
            "--distributed-world-size", "1", "--no-save", "--disable-validation",
            "--log-format", "json", "--log-interval", str(opts.log_interval)]
    if opts.precision != "fp32":
        argv.append(f"--{opts.precision}")
    if device == "cpu":  # --allow-cpu (tests)
        argv.append("--cpu")
    return argv


def run_variant(name, opts, bin_dir, device) -> dict:
    from posenc.harness.fairseq_logs import parse_record
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    started = time.monotonic()
    argv = [sys.executable, "-c", CHILD, *variant_argv(name, opts, bin_dir, device)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not any(ln.startswith("GPU_CHECK ") for ln in lines):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"gpu-check: the {name} run failed (exit status {proc.returncode}): {tail[0]}")
    wps = [float(rec["wps"]) for kind, rec in filter(None, map(parse_record, lines)) if kind == "train_inner"]
    result = json.loads(next(ln for ln in lines if ln.startswith("GPU_CHECK "))[len("GPU_CHECK "):])
    # The first record includes CUDA start-up and the allocator's warm-up; skip it where there are more.
    steady = wps[1:] if len(wps) > 1 else wps
    if not steady:
        raise SystemExit(f"gpu-check: the {name} run logged no train_inner records; raise --max-update")
    return {"wps": statistics.median(steady), "peak_bytes": result["peak_bytes"], "device": result["device"],
            "wall_s": time.monotonic() - started}


def main(argv=None) -> int:
    opts = parse_cli(argv)
    device = cuda_or_stop(opts.allow_cpu)
    started = time.monotonic()
    corpus = synthetic_corpus(opts.cache, opts.data)
    names = list(VARIANTS)
    runs = {name: [] for name in names}
    for round_no in range(opts.rounds):
        order = names if round_no % 2 == 0 else names[::-1]
        for name in order:
            run = run_variant(name, opts, corpus.bin_dir, device)
            runs[name].append(run)
            print(f"gpu-check: round {round_no + 1} {name}: {run['wps']:.0f} words/s, peak "
                  f"{_gib(run['peak_bytes'])}, {run['wall_s']:.0f}s", flush=True)
    figures = {name: {"wps": statistics.median(r["wps"] for r in rs),
                      "peak_bytes": max((r["peak_bytes"] for r in rs if r["peak_bytes"] is not None), default=None)}
               for name, rs in runs.items()}
    stock = figures["stock"]
    print(f"\n{SIZES[opts.size]}, {opts.precision}, {device}, --max-tokens {opts.max_tokens}, "
          f"{opts.max_update} updates x {opts.rounds} round(s), {time.monotonic() - started:.0f}s in all\n")
    print("| variant | words/s | vs stock | peak memory | vs stock |\n|---|---|---|---|---|")
    for name, fig in figures.items():
        fig["wps_ratio"] = fig["wps"] / stock["wps"]
        both = fig["peak_bytes"] and stock["peak_bytes"]
        fig["memory_ratio"] = (fig["peak_bytes"] / stock["peak_bytes"]) if both else None
        memory_ratio = f"{fig['memory_ratio']:.3f}" if fig["memory_ratio"] is not None else "-"
        print(f"| {name} | {fig['wps']:.0f} | {fig['wps_ratio']:.3f} | {_gib(fig['peak_bytes'])} | {memory_ratio} |")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"device": device, "precision": opts.precision, "size": opts.size,
                                               "max_tokens": opts.max_tokens, "max_update": opts.max_update,
                                               "rounds": opts.rounds, "figures": figures}, indent=2) + "\n")
    return 0


def _gib(n):
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


if __name__ == "__main__":
    sys.exit(main())
