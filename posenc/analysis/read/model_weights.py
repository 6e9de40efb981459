"""The weights a position table meets in the model: the query and key projections of a side's
first self-attention layer (the attention-logit properties) and its token embeddings with the
scale fairseq gives them (the table's size next to the tokens')."""

import math

import torch

from posenc.analysis.read.fairseq_checkpoint import TOKEN_KEY, attention_heads, checkpoint_family, find_key, model_args

SELF_ATTENTION_KEY = "{side}.layers.0.self_attn.{proj}.weight"


def first_layer_attention(ckpt: dict, side: str):
    """``(w_q, w_k, heads, scaling, note)`` of the side's first self-attention layer, or
    ``(None, None, None, None, why)``. ``scaling`` is fairseq's query scaling, head_dim^-1/2."""
    state = ckpt["model"]
    args = model_args(ckpt)
    q_key = find_key(state, SELF_ATTENTION_KEY.replace("{proj}", "q_proj"), side)
    k_key = find_key(state, SELF_ATTENTION_KEY.replace("{proj}", "k_proj"), side)
    if q_key is None or k_key is None:
        return None, None, None, None, "no self-attention (layers.0.self_attn) in the state dict"
    heads = attention_heads(args, side)
    if not heads:
        return None, None, None, None, f"{side}_attention_heads not recorded in the checkpoint"
    w_q = state[q_key].detach().to(torch.float64)
    w_k = state[k_key].detach().to(torch.float64)
    if w_q.size(0) % heads:
        return None, None, None, None, f"{q_key} has {w_q.size(0)} rows, not a multiple of {heads} heads"
    note = "position rows as they enter layer 0"
    if args.get(f"{side}_normalize_before") or args.get("layernorm_embedding"):
        note = "the model normalises x + PE before layer 0's attention; the logits here are of the raw position rows"
    return w_q, w_k, heads, (w_q.size(0) // heads) ** -0.5, note


def token_embedding(ckpt: dict, side: str):
    """``(weight, embed_scale, note)`` of a side's token embeddings, or ``(None, None, note)``."""
    state = ckpt["model"]
    args = model_args(ckpt)
    key = find_key(state, TOKEN_KEY, side)
    if key is None:
        return None, None, f"no {TOKEN_KEY.format(side=side)}"
    weight = state[key].detach().to(torch.float64)
    family = checkpoint_family(args, state)
    if family == "transformer" and not args.get("no_scale_embedding"):
        return weight, math.sqrt(weight.size(1)), "transformer: tokens scaled by sqrt(D)"
    if family == "transformer":
        return weight, 1.0, "transformer with no_scale_embedding"
    if family == "fconv":
        return weight, 1.0, "fconv: tokens not scaled"
    return weight, 1.0, "unknown family: tokens assumed unscaled"


