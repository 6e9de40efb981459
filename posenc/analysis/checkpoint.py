"""Position tables inside a fairseq checkpoint.

A fairseq checkpoint is a ``torch.save``d dict: ``"model"`` (the state dict) and ``"cfg"`` (whose
``"model"`` entry holds the architecture arguments, as a dict, an omegaconf config or an argparse
Namespace) or, in older files, ``"args"`` (a Namespace).

Learned tables are ``{encoder,decoder}.embed_positions.weight`` in both fconv and the Transformer.
Their first ``padding_idx + 1`` rows are not positions (row ``padding_idx``, usually 1, is the zero
row pads look up; row 0 is never used), so position p (0-based: the first token) is row
``padding_idx + 1 + p``. Sinusoidal sides keep no weights; their table is rebuilt from the
config (fairseq's layout, ``fairseq`` variant, with the same row offset: the first token gets
the angle of position ``padding_idx + 1``).

Only the file the user names is unpickled (``weights_only=False`` is needed for the Namespace /
omegaconf objects fairseq stores).
"""

import math
import os
from argparse import Namespace
from dataclasses import dataclass, field

import torch

from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, sinusoid_table

SIDES = ("encoder", "decoder")
POSITION_KEY = "{side}.embed_positions.weight"
TOKEN_KEY = "{side}.embed_tokens.weight"
SINUSOID_MARKERS = ("{side}.embed_positions._float_tensor", "{side}.embed_positions.weights")


class CheckpointError(ValueError):
    """A checkpoint that cannot be analysed; the message is one line for the user."""


@dataclass
class PositionTable:
    side: str
    kind: str  # learned | sinusoidal | rope | none | unknown
    table: torch.Tensor = None  # (N, D), row p = position p (first token = 0); None if no table
    source: str = ""  # where it came from
    first_row: int = 0  # row of the state-dict weight that holds position 0
    padding_idx: int = 1
    rows_in_checkpoint: int = 0
    notes: list = field(default_factory=list)


def load_checkpoint(path: str) -> dict:
    if not os.path.exists(path):
        raise CheckpointError(f"no such checkpoint: {path}")
    if not os.path.isfile(path):
        raise CheckpointError(f"not a file: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # any unpickling / format failure becomes one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise CheckpointError(f"cannot read {path} as a torch checkpoint ({type(exc).__name__}: {first[:200]})") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        found = f"keys {sorted(map(str, ckpt))[:8]}" if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{path} is not a fairseq checkpoint: expected a dict with a 'model' state dict, found {found}")
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


def _find_key(state: dict, pattern: str, side: str):
    key = pattern.format(side=side)
    if key in state:
        return key
    matches = [k for k in state if k.endswith("." + key)]
    return matches[0] if len(matches) == 1 else None


def model_family(args: dict, state: dict) -> str:
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


def _configured_kind(side: str, args: dict, family: str, state: dict) -> str:
    explicit = args.get(f"{side}_pos")
    if explicit:
        return str(explicit)
    if any(_find_key(state, m, side) for m in SINUSOID_MARKERS):
        return "sinusoidal"
    if family == "transformer":
        if args.get("no_token_positional_embeddings"):
            return "none"
        return "learned" if args.get(f"{side}_learned_pos") else "sinusoidal"
    if family == "fconv":
        return "none"  # fconv always has a learned table; without the key the side has none
    return "unknown"


def detect_padding_idx(weight: torch.Tensor, default: int = 1):
    """The first all-zero row among rows 0..3 (fairseq keeps the padding row at zero), else
    ``default``. Returns ``(padding_idx, found)``."""
    for i in range(min(4, weight.size(0))):
        if torch.count_nonzero(weight[i]) == 0:
            return i, True
    return default, False


def extract_tables(ckpt: dict, padding_idx=None, max_len=None) -> dict:
    """``{side: PositionTable}`` for encoder and decoder."""
    state = ckpt["model"]
    args = model_args(ckpt)
    family = model_family(args, state)
    out = {}
    for side in SIDES:
        key = _find_key(state, POSITION_KEY, side)
        if key is not None:
            weight = state[key].detach().to(torch.float64)
            notes = []
            pad = padding_idx
            if pad is None:
                pad, found = detect_padding_idx(weight)
                if not found:
                    notes.append(f"no zero padding row among rows 0..3; assumed padding_idx={pad}")
            first = pad + 1
            rows = weight[first:]
            if max_len is not None:
                rows = rows[:max_len]
            if rows.size(0) < 2:
                raise CheckpointError(f"{key} has {weight.size(0)} rows: fewer than 2 positions after row {first}")
            out[side] = PositionTable(side, "learned", rows, key, first, pad, weight.size(0), notes)
            continue
        kind = _configured_kind(side, args, family, state)
        if kind == "sinusoidal":
            dim = args.get(f"{side}_embed_dim")
            tok = _find_key(state, TOKEN_KEY, side)
            if dim is None and tok is not None:
                dim = state[tok].size(1)
            if dim is None:
                out[side] = PositionTable(side, kind, notes=["sinusoidal, but the embedding dimension is unknown"])
                continue
            pad = 1 if padding_idx is None else padding_idx
            n = args.get("max_source_positions" if side == "encoder" else "max_target_positions") or 1024
            if max_len is not None:
                n = min(n, max_len)
            variant = next((str(v) for k, v in args.items() if "variant" in k and str(v) in SINUSOID_VARIANTS), "fairseq")
            table = sinusoid_table(pad + 1 + n, int(dim), variant, dtype=torch.float64)[pad + 1 :]
            out[side] = PositionTable(side, kind, table, f"closed form ({variant} variant; no weights in the checkpoint)",
                                      pad + 1, pad, 0, [f"rebuilt: sinusoid rows {pad + 1}..{pad + n}"])
        else:
            out[side] = PositionTable(side, kind, notes=[f"no {POSITION_KEY.format(side=side)} in the state dict"])
    if all(t.table is None for t in out.values()):
        looked = ", ".join(POSITION_KEY.format(side=s) for s in SIDES)
        kinds = ", ".join(f"{s}: {t.kind}" for s, t in out.items())
        raise CheckpointError(f"no position table in the checkpoint: looked for {looked} "
                              f"(and a sinusoidal setting in its cfg/args; found {kinds})")
    return out


def token_embedding(ckpt: dict, side: str):
    """``(weight, embed_scale, note)`` of a side's token embeddings, or ``(None, None, note)``."""
    state = ckpt["model"]
    args = model_args(ckpt)
    key = _find_key(state, TOKEN_KEY, side)
    if key is None:
        return None, None, f"no {TOKEN_KEY.format(side=side)}"
    weight = state[key].detach().to(torch.float64)
    family = model_family(args, state)
    if family == "transformer" and not args.get("no_scale_embedding"):
        return weight, math.sqrt(weight.size(1)), "transformer: tokens scaled by sqrt(D)"
    if family == "transformer":
        return weight, 1.0, "transformer with no_scale_embedding"
    if family == "fconv":
        return weight, 1.0, "fconv: tokens not scaled"
    return weight, 1.0, "unknown family: tokens assumed unscaled"


__all__ = [
    "CheckpointError",
    "PositionTable",
    "extract_tables",
    "load_checkpoint",
    "model_args",
    "model_family",
    "token_embedding",
]
