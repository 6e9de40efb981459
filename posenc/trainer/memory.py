"""Training memory of one cell, estimated on the CPU: parameters, optimizer state and the
activations one batch keeps for its backward pass.

The model is built as fairseq-train builds it (a joined dictionary of ``vocab`` symbols, the
cell's model flags), one batch of ``max_tokens`` source and as many target tokens (sentences of
``sentence_len``) goes forward with fairseq's label-smoothed loss, and every tensor autograd saves
for the backward pass is counted once (by storage). Weights, gradients and optimizer state are
counted from the parameters: fp32 training keeps weights + gradients + the optimizer's buffers
(NAG: 1, Adam: 2); fp16/bf16 training adds the half-precision copies of weights and gradients to
the fp32 master weights. The GPU also holds the CUDA context, cuDNN workspaces and the caching
allocator's slack (typically 1-2 GiB more); this gives the lower bound, not the last byte.

``scripts/estimate_memory.py`` prints it; the launcher asks it (``python -m posenc.trainer.memory --json``,
a child: the harness's own process never imports torch) how many cells fit on a GPU.
"""

import argparse
import json

import torch

GIB = 2 ** 30
# Calibrated in half precision against the peaks measured on an H200 (results/h200_synthetic.md,
# torch.cuda.max_memory_allocated): IWSLT Transformer bf16 at 8,192 tokens 0.66 GiB, where this
# counts 0.62 GiB of state and 1.54 GiB of half activations (2.16 GiB); fconv_table4 fp16 at 4,000
# tokens 0.66 GiB, against 0.59 + 0.45 (1.05 GiB; both at the synthetic corpus's subword size,
# 1,000). Counting every saved storage for the whole backward pass overstates what is alive at the
# peak; ACTIVATION_SHARE of it keeps every measured peak under the estimate by at least a quarter
# (fconv_table4: 0.84 GiB, 1.28x its peak, the tighter; IWSLT: 1.46 GiB, 2.2x). fp32 has no measured
# peak yet and keeps the whole count.
ACTIVATION_SHARE = 0.55
OPTIMIZER_BUFFERS = {"adam": 2, "nag": 1, "sgd": 0}  # fp32 buffers per parameter


def build(arch: str, vocab: int, model_flags=()):
    """The model fairseq-train would build for ``arch`` with ``model_flags``, on a joined dictionary
    of ``vocab`` symbols, in training mode; and that dictionary."""
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

    argv = ["data-bin", "--task", "translation", "--arch", arch, *model_flags]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, Task()).train(), d


def saved_activation_bytes(model, d, max_tokens: int, sentence_len: int):
    """Bytes autograd keeps for one batch's backward pass (parameters aside), the batch size, the loss."""
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


def estimate(arch: str, vocab: int, max_tokens: int, sentence_len: int = 27, optimizer_buffers: int = 1,
             model_flags=()) -> dict:
    """The estimate's parts, in bytes: ``fp32_state`` / ``half_state`` (weights, gradients,
    optimizer buffers; fp16/bf16 adds half copies) and ``activations`` (fp32; about half in fp16/bf16)."""
    model, d = build(arch, vocab, model_flags)
    n = sum(p.numel() for p in model.parameters())
    activations, bsz, _ = saved_activation_bytes(model, d, max_tokens, sentence_len)
    fp32_state = n * 4 * (2 + optimizer_buffers)
    return {"arch": arch, "parameters": n, "dictionary": len(d), "batch": bsz, "sentence_len": sentence_len,
            "optimizer_buffers": optimizer_buffers, "fp32_state": fp32_state, "half_state": fp32_state + n * 2 * 2,
            "activations": activations}


def training_gib(parts: dict, half: bool) -> float:
    """GiB one training process needs by the estimate (CUDA context and allocator slack not included);
    half precision calibrated (``ACTIVATION_SHARE``)."""
    if half:
        return (parts["half_state"] + ACTIVATION_SHARE * parts["activations"] / 2) / GIB
    return (parts["fp32_state"] + parts["activations"]) / GIB


def parse_cli(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="posenc_fconv_table4")
    p.add_argument("--vocab", type=int, default=40000, help="joined dictionary size")
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--sentence-len", type=int, default=27, help="tokens per sentence, both sides")
    p.add_argument("--optimizer-buffers", type=int, default=None, help="fp32 buffers per parameter (NAG 1, Adam 2)")
    p.add_argument("--optimizer", default="nag", help="fairseq's --optimizer, for its buffers (unless given)")
    p.add_argument("--json", action="store_true", help="print the parts as JSON (bytes)")
    return p.parse_known_args(argv)  # the rest: the cell's own model flags (--dropout 0.2, ...)


def main(argv=None):
    opts, model_flags = parse_cli(argv)
    if opts.optimizer_buffers is None:
        opts.optimizer_buffers = OPTIMIZER_BUFFERS.get(opts.optimizer, 2)  # one we do not know: as Adam
    parts = estimate(opts.arch, opts.vocab, opts.max_tokens, opts.sentence_len, opts.optimizer_buffers, model_flags)
    if opts.json:
        print(json.dumps({**parts, "training_gib_fp32": training_gib(parts, half=False),
                          "training_gib_half": training_gib(parts, half=True)}))
        return
    print(f"{opts.arch}: {parts['parameters'] / 1e6:.1f}M parameters (joined dictionary of {parts['dictionary']}), "
          f"batch {parts['batch']} x {opts.sentence_len} tokens per side")
    print(f"  weights + gradients + {opts.optimizer_buffers} optimizer buffer(s): fp32 "
          f"{parts['fp32_state'] / GIB:.2f} GiB, fp16/bf16 {parts['half_state'] / GIB:.2f} GiB")
    print(f"  activations saved for backward (fp32): {parts['activations'] / GIB:.2f} GiB (about half in fp16/bf16)")
    print(f"  total, fp32: {training_gib(parts, half=False):.2f} GiB + CUDA context and allocator slack")


if __name__ == "__main__":
    main()
