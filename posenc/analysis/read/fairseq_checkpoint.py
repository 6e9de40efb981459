"""A fairseq checkpoint file, unpickled, and its architecture arguments in one format.

A fairseq checkpoint is a ``torch.save``d dict: ``"model"`` (the state dict) and ``"cfg"`` (whose
``"model"`` entry holds the architecture arguments, as a dict, an omegaconf config or an argparse
Namespace) or, in older files, ``"args"`` (a Namespace). ``model_args`` gives them as a plain
dict whichever format the file has.

Only the file the user names is unpickled (``weights_only=False`` is needed for the Namespace /
omegaconf objects fairseq stores).
"""

import os
from argparse import Namespace

import torch

TOKEN_KEY = "{side}.embed_tokens.weight"


class CheckpointError(ValueError):
    """A checkpoint that cannot be analysed; the message is one line for the user."""


def load_checkpoint(path: str) -> dict:
    if not os.path.exists(path):
        raise CheckpointError(f"no such checkpoint: {path}")
    if not os.path.isfile(path):
        raise CheckpointError(f"not a file: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # any unpickling / format failure becomes one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise CheckpointError(f"cannot read {path} as a torch checkpoint "
                              f"({type(exc).__name__}: {first[:200]})") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        found = f"keys {sorted(map(str, ckpt))[:8]}" if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{path} is not a fairseq checkpoint: expected a dict with a 'model' state dict, "
                              f"found {found}")
    return ckpt


def _get(obj, key, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    try:
        return obj[key]  # DictConfig
    except Exception:
        return getattr(obj, key, default)


def _as_dict(obj) -> dict:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, Namespace):
        return vars(obj).copy()
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(obj):
            return OmegaConf.to_container(obj, resolve=False) or {}
    except ImportError:
        pass
    return dict(getattr(obj, "__dict__", {}))


def model_args(ckpt: dict) -> dict:
    """The architecture arguments: ``cfg["model"]``, else ``args``; {} when neither is there."""
    args = _as_dict(_get(ckpt.get("cfg"), "model"))
    if not args:
        args = _as_dict(ckpt.get("args"))
    return args


def find_key(state: dict, pattern: str, side: str):
    key = pattern.format(side=side)
    if key in state:
        return key
    matches = [k for k in state if k.endswith("." + key)]
    return matches[0] if len(matches) == 1 else None


def embed_dim(ckpt: dict, side: str):
    """A side's embedding dimension: as recorded in the args, else the width of its token
    embeddings; None if neither is there."""
    dim = model_args(ckpt).get(f"{side}_embed_dim")
    token_key = find_key(ckpt["model"], TOKEN_KEY, side)
    if dim is None and token_key is not None:
        dim = ckpt["model"][token_key].size(1)
    return dim


def checkpoint_family(args: dict, state: dict) -> str:
    """``fconv``, ``transformer`` or ``unknown``: from the recorded architecture, else the state dict's keys."""
    arch = str(args.get("arch", "") or args.get("_name", ""))
    if "fconv" in arch:
        return "fconv"
    if "transformer" in arch:
        return "transformer"
    if any(".convolutions." in k for k in state):
        return "fconv"
    if any(".layers." in k and "self_attn" in k for k in state):
        return "transformer"
    return "unknown"


def attention_heads(args: dict, side: str):
    """The number of self-attention heads the checkpoint records for a side, or None."""
    heads = args.get(f"{side}_attention_heads") or _get(args.get(side), "attention_heads")
    return int(heads) if heads else None
