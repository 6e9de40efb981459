"""Relative key and value vectors inside a fairseq checkpoint (Shaw et al. 2018): the vectors
``w^K_r``, ``w^V_r`` each self-attention layer of a side adds to its keys and values for the
clipped distance ``r = clip(key - query, k)``, as a function of the distance.

A kind whose registration reads ``vectors`` (``posenc.kinds``) names its rebuild there,
``rebuild(ckpt, side, max_len) -> (RelativeVectors or None, why)``;
:mod:`posenc.analysis.measure.vector_profile` measures what it returns.
"""

import re
from dataclasses import dataclass, field

import torch

from posenc.analysis.read.fairseq_checkpoint import model_args
from posenc.analysis.read.rebuilds import register_rebuild
from posenc.kinds import RELATIVE_KEYS_KEY, RELATIVE_VALUES_KEY


@dataclass
class RelativeVectors:
    side: str
    kind: str
    max_distance: int          # k: distances -k .. k, the last ones shared by everything farther
    distances: torch.Tensor    # (2k+1,) long, -k .. k
    keys: torch.Tensor         # (L, 2k+1, head_dim) float64, w^K per layer (L * H tables with per-head vectors)
    values: torch.Tensor       # (L, 2k+1, head_dim) float64, w^V per layer (the same)
    source: str
    settings: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def _layer_keys(state: dict, pattern: str, side: str) -> dict:
    """``{layer: key}`` of the state-dict keys matching ``pattern`` on ``side``."""
    regex = re.compile(re.escape(pattern.format(side=side, layer="\0")).replace("\0", r"(\d+)") + "$")
    found = {}
    for key in state:
        match = regex.search(key)
        if match:
            found[int(match.group(1))] = key
    return found


def rebuild_shaw(ckpt: dict, side: str, max_len):
    """The ``shaw`` registration's rebuild: every layer's w^K and w^V as the state dict holds them
    (``max_len`` has no say: the tables cover distances -k .. k whatever the length)."""
    state = ckpt["model"]
    keys, values = _layer_keys(state, RELATIVE_KEYS_KEY, side), _layer_keys(state, RELATIVE_VALUES_KEY, side)
    if not keys or sorted(keys) != sorted(values):
        return None, (f"shaw, but no {RELATIVE_KEYS_KEY.format(side=side, layer='N')} and "
                      f"{RELATIVE_VALUES_KEY.format(side=side, layer='N')} pairs in the state dict")
    layers = sorted(keys)
    w_k = torch.stack([state[keys[i]].detach().to(torch.float64) for i in layers])
    w_v = torch.stack([state[values[i]].detach().to(torch.float64) for i in layers])
    rows = w_k.size(1)
    if rows % 2 == 0 or w_v.shape != w_k.shape:
        return None, f"{keys[layers[0]]} has shape {tuple(w_k.shape[1:])}: not (2k+1, head_dim) matching the values"
    k = rows // 2
    args = model_args(ckpt)
    recorded = args.get("shaw_max_distance")
    notes = [f"{len(layers)} layers, k = {k} read from the shape of the tables (distances -{k}..{k}; farther "
             f"ones share the last row of their direction)"]
    if recorded is not None and int(recorded) != k:
        notes.append(f"the checkpoint records shaw_max_distance {recorded}, the tables have 2k+1 = {rows} rows")
    settings = {"max_distance": k, "layers": len(layers), "head_dim": w_k.size(2)}
    heads = args.get(f"{side}_attention_heads")
    if args.get("shaw_heads") == "per_head" and heads and w_k.size(2) % int(heads) == 0:
        # (L, 2k+1, H * Dh) -> (L * H, 2k+1, Dh): each head's vectors are a table of their own
        heads = int(heads)
        w_k, w_v = (w.view(len(layers), rows, heads, -1).transpose(1, 2).reshape(len(layers) * heads, rows, -1)
                    for w in (w_k, w_v))
        settings.update(heads="per_head", num_heads=heads, head_dim=w_k.size(2))
        notes.append(f"one set of vectors per layer and head (shaw_heads per_head): {len(layers) * heads} tables, "
                     f"layer-major (layer l, head h is row l * {heads} + h)")
    return RelativeVectors(side, "shaw", k, torch.arange(-k, k + 1), w_k, w_v,
                           f"{RELATIVE_KEYS_KEY.format(side=side, layer='*')} and values", settings, notes), None


register_rebuild("shaw", rebuild_shaw)

__all__ = ["RelativeVectors", "rebuild_shaw"]
