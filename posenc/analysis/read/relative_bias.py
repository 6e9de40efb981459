"""Relative attention biases inside a fairseq checkpoint: what each head adds to a self-attention
logit, as a function of the relative distance ``key - query``.

A kind whose registration reads a ``bias`` (``posenc.kinds``) names its rebuild there, a function
``rebuild(ckpt, side, max_len) -> (RelativeBias or None, why)``; ``extract_biases`` calls it and
knows no kind. The built-in ones, below, compute the bias with the plugin's own modules
(:mod:`posenc.encodings.attention_bias`; plain torch, no fairseq), built from what the checkpoint
records:

- ``t5``: the learned ``(num_buckets, H)`` table ``{side}.relative_attention_bias.weight``; the
  number of buckets and heads are its shape. The plugin has no flag for T5's ``max_distance`` and
  records none, so its fixed ``T5_MAX_DISTANCE`` is used, with a note.
- ``alibi``: no weights; its slopes follow from the side's number of heads
  (``{side}_attention_heads``, recorded by fairseq), via ``alibi_slopes``.

The encoder's bias is bidirectional (distances ``-N .. N``), the decoder's causal (``-N .. 0``:
keys at or before the query; the causal mask removes the others). ``N`` is ``max_len - 1`` (the
distances within ``max_len`` positions) or, by default, T5's ``max_distance``, from which on
every T5 distance shares the last bucket of its direction.
"""

from dataclasses import dataclass, field

import torch

from posenc.analysis.read.fairseq_checkpoint import attention_heads, embed_dim, find_key, model_args
from posenc.analysis.read.rebuilds import rebuilder, register_rebuild
from posenc.encodings.attention_bias import T5_MAX_DISTANCE, AlibiBias, T5RelativeBias, is_causal, t5_init_std
from posenc.kinds import BIAS, REBUILT, RELATIVE_BIAS_KEY, find_kind

DISTANCE = "key position - query position (negative: the key comes before the query)"


@dataclass
class RelativeBias:
    side: str
    kind: str  # the kind's registered name
    causal: bool
    heads: int
    distances: torch.Tensor  # (K,) long, key - query, ascending
    values: torch.Tensor  # (H, K) float64: the bias head h adds at each distance
    source: str
    settings: dict = field(default_factory=dict)  # t5: num_buckets, max_distance; which were defaulted
    buckets: torch.Tensor = None  # t5: (K,) the bucket of each distance
    slopes: torch.Tensor = None  # alibi: (H,)
    weight: torch.Tensor = None  # learned biases (t5): the weights as in the checkpoint; None for a fixed bias
    init_std: float = None  # t5: the std the plugin drew the weight from
    notes: list = field(default_factory=list)


def profile(module, causal: bool, far: int):
    """``(distances (K,), bias (H, K))`` of a bias module for one query and keys ``far`` positions
    before it (and after it, unless causal), through the module's own forward."""
    k_len = far + 1 if causal else 2 * far + 1
    bias = module(1, k_len, offset=far)[:, 0, :]  # query at position far, keys at 0 .. k_len - 1
    return torch.arange(k_len) - far, bias


def _far(max_len, default: int) -> int:
    return max_len - 1 if max_len is not None else default


def _t5(ckpt: dict, side: str, key: str, max_len, kind: str = "t5"):
    state, args = ckpt["model"], model_args(ckpt)
    weight = state[key].detach().float()
    if weight.dim() != 2 or min(weight.shape) < 1:
        return None, f"{key} has shape {tuple(weight.shape)}, not (num_buckets, heads)"
    num_buckets, heads = weight.shape
    notes = [f"num_buckets {num_buckets} and heads {heads} read from the shape of {key}",
             f"max_distance is not recorded (the plugin has no flag for it): its fixed T5_MAX_DISTANCE = "
             f"{T5_MAX_DISTANCE} used"]
    recorded = attention_heads(args, side)
    if recorded is not None and recorded != heads:
        notes.append(f"the checkpoint records {recorded} {side} attention heads, the bias table has {heads} columns")
    dim = embed_dim(ckpt, side)
    causal = is_causal(side)
    init_std = t5_init_std(int(dim)) if dim else None
    with torch.random.fork_rng(devices=[]):  # the module draws an initial table; keep the caller's RNG
        module = T5RelativeBias(heads, causal, init_std=init_std or 1.0, num_buckets=num_buckets,
                                max_distance=T5_MAX_DISTANCE)
    module.load_state_dict({"weight": weight})
    far = _far(max_len, T5_MAX_DISTANCE)
    with torch.no_grad():
        distances, values = profile(module, causal, far)
        buckets = module.buckets(1, distances.numel(), offset=far)[0]
    settings = {"num_buckets": num_buckets, "max_distance": T5_MAX_DISTANCE, "heads": heads,
                "defaulted": ["max_distance"]}
    return RelativeBias(side, kind, causal, heads, distances, values.double(), key, settings, buckets=buckets,
                        weight=weight, init_std=init_std, notes=notes), None


def rebuild_alibi(ckpt: dict, side: str, max_len):
    """The ``alibi`` registration's rebuild: the closed form from the recorded number of heads."""
    heads = attention_heads(model_args(ckpt), side)
    if heads is None:
        return None, f"alibi, but {side}_attention_heads is not recorded: the slopes follow from it"
    causal = is_causal(side)
    module = AlibiBias(heads, causal)
    with torch.no_grad():
        distances, values = profile(module, causal, _far(max_len, T5_MAX_DISTANCE))
    notes = [f"fixed, no learned parameters: -slope_h * |distance| with the slopes of {heads} heads "
             f"({side}_attention_heads as recorded)"]
    if max_len is None:
        notes.append(f"distances up to T5's max_distance {T5_MAX_DISTANCE} by default (--max-len N: up to N - 1)")
    return RelativeBias(side, "alibi", causal, heads, distances, values.double(),
                        f"closed form (alibi_slopes of {heads} heads; no weights in the checkpoint)",
                        {"heads": heads, "defaulted": []}, slopes=module.slopes.clone(), notes=notes), None


def rebuild_t5(ckpt: dict, side: str, max_len):
    """The ``t5`` registration's rebuild: the learned table of the side, through T5RelativeBias."""
    key = find_key(ckpt["model"], RELATIVE_BIAS_KEY, side)
    if key is None:
        return None, f"t5, but no {RELATIVE_BIAS_KEY.format(side=side)} in the state dict"
    return _t5(ckpt, side, key, max_len)


def extract_rebuilt(ckpt: dict, kinds: dict, max_len=None):
    """``(rebuilt, why)``: ``{side: (reads, result)}`` for the sides whose kind (``kinds[side]``) is
    read through its registration's rebuild (``posenc.kinds.REBUILT``: a bias, relative vectors), and
    ``{side: reason}`` for those that could not be rebuilt."""
    rebuilt, why = {}, {}
    for side, kind in kinds.items():
        registered = find_kind(kind)
        if registered is None or registered.checkpoint.reads not in REBUILT:
            continue
        rebuild = rebuilder(registered)
        if rebuild is None:
            why[side] = f"{kind}: reads {registered.checkpoint.reads}, but no rebuild is registered for it"
            continue
        result, reason = rebuild(ckpt, side, max_len)
        if result is None:
            why[side] = reason
        else:
            rebuilt[side] = (registered.checkpoint.reads, result)
    return rebuilt, why


def extract_biases(ckpt: dict, kinds: dict, max_len=None):
    """``(biases, why)``: ``{side: RelativeBias}`` for the sides whose kind reads a bias."""
    rebuilt, why = extract_rebuilt(ckpt, kinds, max_len)
    return {side: result for side, (reads, result) in rebuilt.items() if reads == BIAS}, why


register_rebuild("alibi", rebuild_alibi)
register_rebuild("t5", rebuild_t5)

__all__ = ["DISTANCE", "RelativeBias", "extract_biases", "extract_rebuilt", "profile", "rebuild_alibi",
           "rebuild_t5"]
