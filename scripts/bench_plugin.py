#!/usr/bin/env python
"""Training-step overhead of the posenc fairseq plugin (issues 2 and 11, "Performance").

Comparisons, each between two models of identical shape holding the same weights, on the
same batch, timed forward + backward with fairseq's label-smoothed cross-entropy (eps 0.1) over
the decoder output:

  (a) ``posenc_fconv`` at default flags        vs stock ``fconv``        target <= 1.03
  (b) ``posenc_transformer`` at default flags  vs stock ``transformer``  target <= 1.03
  (c) ``posenc_transformer`` rope/rope         vs the same, sinusoidal   target <= 1.15
  (d) ``posenc_transformer`` alibi/alibi       vs the same, sinusoidal   target <= 1.15
  (e) ``posenc_transformer`` t5/t5             vs the same, sinusoidal   target <= 1.15
  (f) ``posenc_transformer`` shaw/shaw         vs the same, sinusoidal   target <= 1.30 small, 1.15 iwslt
  (g) ``posenc_transformer`` shape/shape       vs the same, sinusoidal   target <= 1.05
  (h) ``posenc_transformer`` cape/cape         vs the same, sinusoidal   target <= 1.05

(c)-(h) are every built-in Transformer kind other than ``learned`` and ``sinusoidal`` (issue 31's
targets for the last three). For them the sinusoidal model's state dict is loaded into the other
one (T5 keeps its own bias tables and Shaw its a^K, a^V, the only keys the sinusoidal model lacks).

Models are built in-process exactly as fairseq-train builds them (training parser, model args,
architecture, ``build_model`` with the task's dictionaries); stock and posenc arguments are
checked equal apart from the position flags, and the reference model's state dict is loaded
strictly into the other one. ``--size small`` (default) times ``posenc_fconv_small`` /
``posenc_transformer_small`` against stock ``fconv`` / ``transformer`` given the same size flags;
``--size iwslt`` times the ``*_iwslt_de_en`` architectures (several seconds a step on 2 cores).

Timing (the machine is shared and noisy): both models live in one process and run in ABBA
blocks after warm-up steps, alternating ABBA and BAAB so neither model always runs first after a
collection; each block gives one ratio (B1 + B2) / (A1 + A2), which cancels linear drift in
machine load within the block. Reported: the median per-step wall time of each
model, the median of the per-block ratios (the figure checked against the target) and their
interquartile range, and the median per-block ratio of process
CPU time (less affected by being descheduled). Dropout is on (training mode); each step
reseeds the RNG with its block index so A and B draw the same masks. Python's garbage collector
runs between blocks only. ``--budget`` caps the timing time, so a loaded machine gives fewer blocks
rather than a longer run.

OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it; it must
be set before torch loads). With libgomp's default spin-waiting, two torch threads on a 2-core
machine that other jobs also load spin against those jobs and against each other: a 0.3 s step
took 2-6 s and the ratios were noise. The policy applies to both models of a pair alike.

Exit status is 0 unless something crashes; PASS/FAIL is printed per target.
"""

import argparse
import gc
import logging
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads its OpenMP runtime

import torch  # noqa: E402

from posenc.kinds import BUILTIN_KINDS, find_kind  # noqa: E402

# The built-in Transformer kinds other than the stock ones, each timed against sinusoidal positions.
KINDS = tuple(k for k in BUILTIN_KINDS if "transformer" in find_kind(k).families
              and k not in ("learned", "sinusoidal", "none"))
# Targets: the ratio's ceiling, one number or {size: number}.
TARGETS = {"fconv": 1.03, "transformer": 1.03, **{k: 1.15 for k in KINDS}, "shaw": {"small": 1.30, "iwslt": 1.15},
           "shape": 1.05, "cape": 1.05, "control": None}
LABELS = {"fconv": "posenc/stock", "transformer": "posenc/stock", **{k: f"{k}/sinusoidal" for k in KINDS},
          "control": "stock/stock"}
DEFAULT_COMPARISONS = ["fconv", "transformer", *KINDS]
SMALL_FLAGS = {  # stock archs given the sizes of posenc_*_small (checked against them below)
    "fconv": ["--encoder-embed-dim", "64", "--encoder-layers", "[(64, 3)] * 6",
              "--decoder-embed-dim", "64", "--decoder-layers", "[(64, 5)] * 3",
              "--decoder-out-embed-dim", "64", "--dropout", "0.1"],
    "transformer": ["--encoder-embed-dim", "128", "--encoder-ffn-embed-dim", "256", "--encoder-layers", "3",
                    "--encoder-attention-heads", "4", "--decoder-layers", "3", "--decoder-attention-heads", "4",
                    "--dropout", "0.1"],
}


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40,
                   help="timed ABBA/BAAB blocks per comparison (4 steps each), at most")
    p.add_argument("--budget", type=float, default=250.0,
                   help="seconds of timing for all comparisons together (split evenly); a comparison stops "
                        "early (after at least 3 blocks) when its share is spent")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps per model")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--size", choices=["small", "iwslt"], default="small")
    p.add_argument("--batch", type=int, default=32, help="sentences per batch")
    p.add_argument("--src-len", type=int, default=30)
    p.add_argument("--tgt-len", type=int, default=30)
    p.add_argument("--vocab", type=int, default=8000, help="dictionary size (dummy symbols), shared by both sides")
    p.add_argument("--only", nargs="+", choices=list(TARGETS), default=DEFAULT_COMPARISONS,
                   help="comparisons to run; 'control' (not run by default) times stock transformer "
                        "against a copy of itself, the A/A noise floor")
    opts = p.parse_args(argv)
    if opts.steps < 1 or opts.threads < 1:
        p.error("--steps and --threads must be at least 1")
    return opts


def make_dictionary(num_words):
    from fairseq.data import Dictionary
    d = Dictionary()
    for i in range(num_words - d.nspecial):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=8)
    return d


class Task:
    """What ``build_model`` reads from a translation task: its two dictionaries."""

    def __init__(self, dictionary):
        self.source_dictionary = self.target_dictionary = dictionary


def build(arch, extra, task, seed=0):
    """The model fairseq-train would build for ``--arch arch extra``."""
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posenc.fairseq_plugin  # noqa: F401  (registers posenc_*)

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["data-bin-unused", "--task", "translation", "--arch", arch, *extra])
    torch.manual_seed(seed)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task).train(), args


def make_batch(d, bsz, src_len, tgt_len, seed=1):
    """Left-padded sources and right-padded targets of lengths 80-100% of the maximum, as a
    length-bucketed fairseq batch looks; ``prev_output_tokens`` is eos + target[:-1]."""
    g = torch.Generator().manual_seed(seed)
    pad, eos = d.pad(), d.eos()
    src = torch.full((bsz, src_len), pad, dtype=torch.long)
    tgt = torch.full((bsz, tgt_len), pad, dtype=torch.long)
    prev = torch.full((bsz, tgt_len), pad, dtype=torch.long)
    for i in range(bsz):
        n = int(torch.randint(int(0.8 * src_len), src_len + 1, (1,), generator=g))
        src[i, src_len - n:-1] = torch.randint(d.nspecial, len(d), (n - 1,), generator=g)
        src[i, -1] = eos
        m = int(torch.randint(int(0.8 * tgt_len), tgt_len + 1, (1,), generator=g))
        tgt[i, :m - 1] = torch.randint(d.nspecial, len(d), (m - 1,), generator=g)
        tgt[i, m - 1] = eos
        prev[i, 0] = eos
        prev[i, 1:m] = tgt[i, :m - 1]
    return src, src.ne(pad).sum(1), prev, tgt


def train_step(model, batch, pad, seed):
    """One forward + backward; returns (wall seconds, process CPU seconds)."""
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    src, src_lengths, prev, tgt = batch
    torch.manual_seed(seed)
    for p in model.parameters():
        p.grad = None
    t0, c0 = time.perf_counter(), time.process_time()
    net_output = model(src, src_lengths, prev)
    lprobs = model.get_normalized_probs(net_output, log_probs=True).view(-1, net_output[0].size(-1))
    loss, _ = label_smoothed_nll_loss(lprobs, tgt.view(-1), 0.1, ignore_index=pad, reduce=True)
    loss.backward()
    return time.perf_counter() - t0, time.process_time() - c0


def compare(name, model_a, model_b, batch, pad, steps, warmup, deadline):
    """ABBA / BAAB blocks of A (reference) and B until ``steps`` blocks are done or ``deadline``
    (``time.perf_counter()`` value) has passed, with at least 3 blocks."""
    for i in range(warmup):
        train_step(model_a, batch, pad, i)
        train_step(model_b, batch, pad, i)
    wall_a, wall_b, ratios, cpu_ratios = [], [], [], []
    gc.disable()  # collections happen between blocks, never inside a timed step
    try:
        for block in range(steps):
            if block >= 3 and time.perf_counter() > deadline:
                break
            gc.collect()
            if block % 2 == 0:  # ABBA, then BAAB: each model is first in half the blocks
                a1 = train_step(model_a, batch, pad, block)
                b1 = train_step(model_b, batch, pad, block)
                b2 = train_step(model_b, batch, pad, block)
                a2 = train_step(model_a, batch, pad, block)
            else:
                b1 = train_step(model_b, batch, pad, block)
                a1 = train_step(model_a, batch, pad, block)
                a2 = train_step(model_a, batch, pad, block)
                b2 = train_step(model_b, batch, pad, block)
            wall_a += [a1[0], a2[0]]
            wall_b += [b1[0], b2[0]]
            ratios.append((b1[0] + b2[0]) / (a1[0] + a2[0]))
            cpu_ratios.append((b1[1] + b2[1]) / (a1[1] + a2[1]))
    finally:
        gc.enable()
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    return {"name": name, "a": statistics.median(wall_a), "b": statistics.median(wall_b),
            "ratio": statistics.median(ratios), "q1": q[0], "q3": q[2], "blocks": len(ratios),
            "cpu_ratio": statistics.median(cpu_ratios)}


def family_archs(family, size):
    """(stock arch, stock flags, posenc arch) of one family at the chosen size."""
    if size == "iwslt":
        return f"{family}_iwslt_de_en", [], f"posenc_{family}_iwslt_de_en"
    return family, SMALL_FLAGS[family], f"posenc_{family}_small"


def check_same_sizes(stock_args, ours_args):
    from posenc.kinds import position_settings

    ours_keys = {"arch", *position_settings()}
    a, b = vars(stock_args), vars(ours_args)
    diff = {k for k in set(a) | set(b) if k not in ours_keys and a.get(k) != b.get(k)}
    if diff:
        raise SystemExit(f"stock and posenc arguments differ in {sorted(diff)}")


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def load_sinusoidal_weights(model, sinusoidal):
    """All weights of the sinusoidal model; only the kind's own position parameters stay as built."""
    missing, unexpected = model.load_state_dict(sinusoidal.state_dict(), strict=False)
    if unexpected or any("relative_attention_bias" not in k and ".relative." not in k for k in missing):
        raise SystemExit(f"state dicts differ beyond the position parameters: {missing} {unexpected}")


def run(opts):
    warnings.simplefilter("ignore")  # fairseq/torch deprecation chatter, once per model built
    logging.disable(logging.WARNING)
    torch.set_num_threads(opts.threads)
    d = make_dictionary(opts.vocab)
    task = Task(d)
    batch = make_batch(d, opts.batch, opts.src_len, opts.tgt_len)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, python {sys.version.split()[0]}, size {opts.size}; "
          f"{os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print(f"batch: {opts.batch} sentences x {opts.src_len} source / {opts.tgt_len} target tokens (max; "
          f"{int(batch[1].sum())} / {int(batch[3].ne(d.pad()).sum())} real), vocab {len(d)}; "
          f"{opts.warmup} warm-up steps per model, up to {opts.steps} ABBA/BAAB blocks, "
          f"timing budget {opts.budget:.0f} s")
    print("step = forward + backward, label-smoothed cross-entropy (eps 0.1), training mode")
    results = []
    share = opts.budget / len(opts.only)

    def timed(name, model_a, model_b, a_name, b_name):
        results.append(compare(name, model_a, model_b, batch, d.pad(), opts.steps, opts.warmup,
                               time.perf_counter() + share))
        target = TARGETS[name]
        results[-1]["target"] = target.get(opts.size) if isinstance(target, dict) else target
        report(results[-1], a_name, b_name)

    for family in ("fconv", "transformer"):
        ours = (family,) if family == "fconv" else (family, *KINDS, "control")
        wanted = [c for c in opts.only if c in ours]
        if not wanted:
            continue
        stock_arch, flags, ours_arch = family_archs(family, opts.size)
        stock, stock_args = build(stock_arch, flags, task)
        ours, ours_args = build(ours_arch, [], task)
        check_same_sizes(stock_args, ours_args)
        ours.load_state_dict(stock.state_dict(), strict=True)
        size = f"{n_params(stock) / 1e6:.2f}M parameters each"
        if family in wanted:
            print(f"\n({family}) {ours_arch} default flags vs {stock_arch} {' '.join(flags)}".rstrip() + f"; {size}")
            timed(family, stock, ours, "stock", "posenc")
        for kind in (k for k in KINDS if k in wanted):
            other, _ = build(ours_arch, ["--encoder-pos", kind, "--decoder-pos", kind], task)
            load_sinusoidal_weights(other, ours)
            extra = n_params(other) - n_params(ours)
            print(f"\n({kind}) {ours_arch} --encoder-pos {kind} --decoder-pos {kind} vs {ours_arch} (sinusoidal); "
                  f"{size}" + (f", +{extra} for {kind}" if extra else ""))
            timed(kind, ours, other, "sinusoidal", kind)
        if "control" in wanted:
            twin, _ = build(stock_arch, flags, task)
            twin.load_state_dict(stock.state_dict(), strict=True)
            print(f"\n(control) {stock_arch} vs a second {stock_arch} of the same weights (A/A: the noise floor)")
            timed("control", stock, twin, "stock", "stock 2")
    print(f"\nsummary (load average {os.getloadavg()[0]:.2f} at end):")
    for r in results:
        print(f"  {r['name']:<12} {LABELS[r['name']]:<16} median ratio {r['ratio']:.3f} "
              f"(IQR {r['q1']:.3f} - {r['q3']:.3f}), {verdict(r)}")
    return results


def verdict(r):
    target = r["target"]
    if target is None:
        return "no target"
    return f"target <= {target:.2f}: " + ("PASS" if r["ratio"] <= target else "FAIL")


def report(r, a_name, b_name):
    print(f"  {a_name:>10}: median {1e3 * r['a']:7.1f} ms/step")
    print(f"  {b_name:>10}: median {1e3 * r['b']:7.1f} ms/step")
    print(f"  ratio {b_name}/{a_name}: median of per-block ratios {r['ratio']:.3f} over {r['blocks']} blocks "
          f"(IQR {r['q1']:.3f} - {r['q3']:.3f}; median CPU-time ratio {r['cpu_ratio']:.3f}); {verdict(r)}",
          flush=True)


if __name__ == "__main__":
    t0 = time.perf_counter()
    run(parse_cli())
    print(f"total {time.perf_counter() - t0:.0f} s")
