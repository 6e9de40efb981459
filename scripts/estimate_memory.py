#!/usr/bin/env python
"""Training memory of one cell, estimated on the CPU: parameters, optimizer state and the
activations one batch keeps for its backward pass.

    .venv/bin/python scripts/estimate_memory.py --arch posenc_fconv_table4 --vocab 40000 --max-tokens 4000

The model is built as fairseq-train builds it (a joined dictionary of ``--vocab`` symbols), one
batch of ``--max-tokens`` source and as many target tokens (sentences of ``--sentence-len``) goes
forward with fairseq's label-smoothed loss, and every tensor autograd saves for the backward
pass is counted once (by storage). Weights, gradients and optimizer state are counted from the
parameters: fp32 training keeps weights + gradients + the optimizer's buffers (NAG: 1, Adam: 2);
fp16/bf16 training adds the half-precision copies of weights and gradients to the fp32 master
weights. The GPU also holds the CUDA context, cuDNN workspaces and the caching allocator's slack
(typically 1-2 GiB more); this gives the lower bound, not the last byte.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="posenc_fconv_table4")
    p.add_argument("--vocab", type=int, default=40000, help="joined dictionary size")
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--sentence-len", type=int, default=27, help="tokens per sentence, both sides")
    p.add_argument("--optimizer-buffers", type=int, default=1, help="fp32 buffers per parameter (NAG 1, Adam 2)")
    return p.parse_args(argv)


def build(arch, vocab):
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posenc.fairseq_plugin  # noqa: F401

    d = Dictionary()
    for i in range(vocab - d.nspecial):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=8)

    class Task:
        source_dictionary = target_dictionary = d

    argv = ["data-bin", "--task", "translation", "--arch", arch]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, Task()).train(), d


def saved_activation_bytes(model, d, max_tokens, sentence_len):
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
    bsz = max(1, max_tokens // sentence_len)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(d.nspecial, len(d), (bsz, sentence_len), generator=g)
    src[:, -1] = d.eos()
    tgt = torch.randint(d.nspecial, len(d), (bsz, sentence_len), generator=g)
    prev = torch.cat([torch.full((bsz, 1), d.eos()), tgt[:, :-1]], dim=1)
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(src, torch.full((bsz,), sentence_len), prev)
        lprobs = model.get_normalized_probs(out, log_probs=True).view(-1, out[0].size(-1))
        loss, _ = label_smoothed_nll_loss(lprobs, tgt.view(-1), 0.1, ignore_index=d.pad(), reduce=True)
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in param_ptrs), bsz, loss


def main(argv=None):
    opts = parse_cli(argv)
    model, d = build(opts.arch, opts.vocab)
    n = sum(p.numel() for p in model.parameters())
    activations, bsz, _ = saved_activation_bytes(model, d, opts.max_tokens, opts.sentence_len)
    fp32_state = n * 4 * (2 + opts.optimizer_buffers)
    half_state = fp32_state + n * 2 * 2
    gib = 2 ** 30
    print(f"{opts.arch}: {n / 1e6:.1f}M parameters (joined dictionary of {len(d)}), batch {bsz} x {opts.sentence_len} "
          f"tokens per side")
    print(f"  weights + gradients + {opts.optimizer_buffers} optimizer buffer(s): fp32 {fp32_state / gib:.2f} GiB, "
          f"fp16/bf16 {half_state / gib:.2f} GiB")
    print(f"  activations saved for backward (fp32): {activations / gib:.2f} GiB (about half in fp16/bf16)")
    print(f"  total, fp32: {(fp32_state + activations) / gib:.2f} GiB + CUDA context and allocator slack")


if __name__ == "__main__":
    main()
