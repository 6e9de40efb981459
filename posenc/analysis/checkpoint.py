"""Position tables inside a fairseq checkpoint.

A fairseq checkpoint is a ``torch.save``d dict: ``"model"`` (the state dict) and ``"cfg"`` (whose
``"model"`` entry holds the architecture arguments, as a dict, an omegaconf config or an argparse
Namespace) or, in older files, ``"args"`` (a Namespace).

Learned tables are ``{encoder,decoder}.embed_positions.weight`` in both fconv and the Transformer.
Their first ``padding_idx + 1`` rows are not positions (row ``padding_idx``, usually 1, is the zero
row pads look up; row 0 is never used), so position p (0-based: the first token) is row
``padding_idx + 1 + p``. Rows past the longest training sentence never get a gradient; when the
checkpoint keeps the optimizer state, the rows training reached are those with a nonzero second
moment, and only they are analysed unless ``max_len`` says otherwise.

Sinusoidal sides keep no weights; their table is rebuilt exactly as the model built it, with the
plugin's own function (``model_sinusoid_table``) from the settings the plugin records in the args
(variant, scale, base), and for checkpoints written before it recorded them, from the plugin's
defaults (``posenc.encodings.defaults``): the same rows, the same row offset (the first token gets
the angle of position ``padding_idx + 1``) and the same float32 arithmetic.

Sides with a relative attention bias (t5, alibi) have no table; :mod:`posenc.analysis.bias`
rebuilds their bias. A rope side has neither and is listed with a note.

Only the file the user names is unpickled (``weights_only=False`` is needed for the Namespace /
omegaconf objects fairseq stores).
"""

import math
import os
from argparse import Namespace
from dataclasses import dataclass, field

import torch

from posenc.encodings.defaults import ROPE_BASE, SINUSOID_BASE, SINUSOID_VARIANT, default_sinusoidal_scale
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, model_sinusoid_table
from posenc.kinds import ATTENTION_BIAS_KINDS

SIDES = ("encoder", "decoder")
POSITION_KEY = "{side}.embed_positions.weight"
TOKEN_KEY = "{side}.embed_tokens.weight"
SINUSOID_MARKERS = ("{side}.embed_positions._float_tensor", "{side}.embed_positions.weights")
SELF_ATTENTION_KEY = "{side}.layers.0.self_attn.{proj}.weight"
RELATIVE_BIAS_KEY = "{side}.relative_attention_bias.weight"  # T5's (num_buckets, H), shared by a side's layers
DEFAULT_MAX_POSITIONS = 1024  # fairseq's default --max-source/target-positions


class CheckpointError(ValueError):
    """A checkpoint that cannot be analysed; the message is one line for the user."""


@dataclass
class PositionTable:
    side: str
    kind: str  # learned | sinusoidal | rope | alibi | t5 | none | unknown
    table: torch.Tensor = None  # (N, D), row p = position p (first token = 0); None if no table
    source: str = ""  # where it came from
    first_row: int = 0  # row of the state-dict weight that holds position 0
    padding_idx: int = 1
    rows_in_checkpoint: int = 0
    notes: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # sinusoid: variant, scale, base, and which were defaulted
    trained_positions: int = None  # learned: positions whose rows training updated, if the checkpoint tells


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
    if any(find_key(state, m, side) for m in SINUSOID_MARKERS):
        return "sinusoidal"
    if find_key(state, RELATIVE_BIAS_KEY, side):
        return "t5"
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


def sinusoid_settings(args: dict, family: str) -> dict:
    """Variant, scale and base of a sinusoidal side: as the checkpoint's args record them (the
    plugin resolves and records all three), else the plugin's defaults, listed in ``defaulted``."""
    defaulted = []

    def setting(name, default):
        value = args.get(name)
        if value is None:
            defaulted.append(name)
            return default
        return value

    fallback_scale = default_sinusoidal_scale(family) if family in ("fconv", "transformer") else 1.0
    variant = str(setting("sinusoidal_variant", SINUSOID_VARIANT))
    if variant not in SINUSOID_VARIANTS:
        raise CheckpointError(f"the checkpoint's sinusoidal_variant {variant!r} is unknown; "
                              f"allowed: {', '.join(SINUSOID_VARIANTS)}")
    try:
        scale = float(setting("sinusoidal_scale", fallback_scale))
        base = float(setting("sinusoidal_base", SINUSOID_BASE))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"the checkpoint's sinusoid settings are not numbers: {exc}") from None
    if not (math.isfinite(base) and base > 1):
        raise CheckpointError(f"the checkpoint's sinusoidal_base {base:g} is not a number greater than 1")
    return {"variant": variant, "scale": scale, "base": base, "defaulted": defaulted}


def _usable_positions(args: dict, side: str, family: str, padding_idx: int) -> int:
    """How many positions the model serves: fconv's argument counts the padding rows too."""
    n = args.get("max_source_positions" if side == "encoder" else "max_target_positions") or DEFAULT_MAX_POSITIONS
    return int(n) - padding_idx - 1 if family == "fconv" else int(n)


def _state_shape(entry):
    """The shape of the parameter an optimizer state entry belongs to (its first tensor with
    dimensions), or None."""
    if not isinstance(entry, dict):
        return None
    for value in entry.values():
        if torch.is_tensor(value) and value.dim() > 0:
            return tuple(value.shape)
    return None


def optimizer_states(ckpt: dict):
    """``{state-dict key: optimizer state}`` for the model's parameters, or ``(None, why)``.

    fairseq keeps the optimizer's per-parameter state (``last_optimizer_state``) indexed by the
    parameters' order, which is the state dict's order without its buffers; a buffer is told
    apart by a shape that does not fit the next parameter's state."""
    opt = ckpt.get("last_optimizer_state")
    if not isinstance(opt, dict) or not isinstance(opt.get("state"), dict):
        return None, "the checkpoint keeps no optimizer state"
    order = [i for group in opt.get("param_groups") or [] for i in group.get("params", [])]
    state, model = opt["state"], ckpt["model"]
    keys = list(model)
    spare = len(keys) - len(order)  # buffers in the state dict
    if spare < 0 or not order:
        return None, "the optimizer state does not match the model's parameters"
    mapping, ki, skipped = {}, 0, 0
    for idx in order:
        shape = _state_shape(state.get(idx))
        while ki < len(keys):
            key = keys[ki]
            ki += 1
            if shape is None or tuple(model[key].shape) == shape:
                mapping[key] = state.get(idx)
                break
            skipped += 1
        else:
            return None, "the optimizer state does not line up with the model's parameters (flattened, e.g. --fp16?)"
    if skipped > spare:
        return None, "the optimizer state does not line up with the model's parameters"
    return mapping, ""


def trained_positions(ckpt: dict, key: str, padding_idx: int):
    """``(L, note)``: positions 0..L-1 of the table under ``key`` got a gradient in training
    (a nonzero second moment, or whatever same-shaped state the optimizer keeps); ``(None, why)``
    when the checkpoint cannot tell."""
    states, why = optimizer_states(ckpt)
    if states is None:
        return None, why
    entry = states.get(key) or {}
    shape = tuple(ckpt["model"][key].shape)
    moment = entry.get("exp_avg_sq")
    if not torch.is_tensor(moment) or tuple(moment.shape) != shape:
        moment = next((v for v in entry.values() if torch.is_tensor(v) and tuple(v.shape) == shape), None)
    if moment is None:
        return None, f"no per-row optimizer state for {key}"
    active = (moment.detach().to(torch.float64) != 0).any(dim=1)
    if padding_idx < active.numel() and active[padding_idx]:
        return None, f"the optimizer state of {key} has a nonzero padding row: not trusted"
    rows = torch.nonzero(active[padding_idx + 1 :]).flatten()
    if rows.numel() == 0:
        return 0, f"no position row of {key} was ever updated"
    length = int(rows[-1]) + 1
    gaps = length - rows.numel()
    note = f"training updated positions 0..{length - 1} (nonzero optimizer state)"
    if gaps:
        note += f", {gaps} of them never"
    return length, note


def extract_tables(ckpt: dict, padding_idx=None, max_len=None, require_table: bool = True) -> dict:
    """``{side: PositionTable}`` for encoder and decoder; a CheckpointError when neither side has
    a table, unless ``require_table`` is False (a model without positions, e.g. a sweep's
    ``placement=none`` cell).

    A learned table gives the positions ``max_len`` names, else those training reached (when the
    optimizer state tells), else all its rows. A sinusoidal side gives ``max_len`` positions, else
    as many as the model serves."""
    state = ckpt["model"]
    args = model_args(ckpt)
    family = model_family(args, state)
    out = {}
    for side in SIDES:
        key = find_key(state, POSITION_KEY, side)
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
            trained, note = trained_positions(ckpt, key, pad)
            if note:
                notes.append(note)
            if max_len is not None:
                rows = rows[:max_len]
            elif trained is not None and trained >= 2:
                rows = rows[:trained]
                notes.append(f"analysed positions 0..{trained - 1}, the ones training reached; the rows after "
                             f"them keep their initialisation (--max-len N analyses the first N)")
            if rows.size(0) < 2:
                raise CheckpointError(f"{key} has {weight.size(0)} rows: fewer than 2 positions after row {first}")
            out[side] = PositionTable(side, "learned", rows, key, first, pad, weight.size(0), notes,
                                      trained_positions=trained)
            continue
        kind = _configured_kind(side, args, family, state)
        if kind == "sinusoidal":
            dim = embed_dim(ckpt, side)
            if dim is None:
                out[side] = PositionTable(side, kind, notes=["sinusoidal, but the embedding dimension is unknown"])
                continue
            pad = 1 if padding_idx is None else padding_idx
            n = _usable_positions(args, side, family, pad)
            if max_len is not None:
                n = min(n, max_len)
            settings = sinusoid_settings(args, family)
            table = model_sinusoid_table(pad + 1 + n, int(dim), pad, settings["variant"], settings["scale"],
                                         settings["base"])[pad + 1 :].to(torch.float64)
            notes = [f"rebuilt as the model builds it: rows {pad + 1}..{pad + n} of the {settings['variant']} "
                     f"sinusoid, base {settings['base']:g}, times {settings['scale']:.6g}"]
            if settings["defaulted"]:
                notes.append("not recorded in the checkpoint, the plugin's defaults used: "
                             f"{', '.join(settings['defaulted'])}")
            out[side] = PositionTable(side, kind, table,
                                      f"closed form ({settings['variant']} variant; no weights in the checkpoint)",
                                      pad + 1, pad, 0, notes, settings=settings)
        else:
            out[side] = PositionTable(side, kind, notes=[_tableless_note(kind, side, args)])
    if require_table and all(t.table is None for t in out.values()):
        raise nothing_to_analyse(out)
    return out


def _tableless_note(kind: str, side: str, args: dict) -> str:
    """Why a side has no table, in the reader's terms."""
    if kind == "rope":
        base = args.get("rope_base")
        return (f"rope rotates queries and keys inside self-attention (base {float(base or ROPE_BASE):g}"
                f"{'' if base else ', the default'}): no position table or bias to analyse")
    if kind in ATTENTION_BIAS_KINDS:
        return (f"{kind}: a relative bias on the self-attention logits, no position table "
                "(its bias is under relative_bias)")
    return f"no {POSITION_KEY.format(side=side)} in the state dict"


def nothing_to_analyse(tables: dict, why=None) -> CheckpointError:
    """The one-line error of a checkpoint with neither a position table nor a relative attention
    bias on any side; ``why``: ``{side: reason}`` for sides whose bias could not be rebuilt."""
    looked = ", ".join(POSITION_KEY.format(side=s) for s in SIDES)
    kinds = ", ".join(f"{s}: {t.kind}" + (f" ({why[s]})" if why and why.get(s) else "") for s, t in tables.items())
    message = (f"no position table or relative attention bias in the checkpoint: looked for {looked} "
               f"(and a sinusoidal, alibi or t5 setting in its cfg/args; found {kinds})")
    if any(t.kind == "rope" for t in tables.values()):
        message += "; rope rotates queries and keys and leaves nothing to analyse"
    return CheckpointError(message)


def attention_heads(args: dict, side: str):
    """The number of self-attention heads the checkpoint records for a side, or None."""
    heads = args.get(f"{side}_attention_heads") or _get(args.get(side), "attention_heads")
    return int(heads) if heads else None


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
    "RELATIVE_BIAS_KEY",
    "attention_heads",
    "embed_dim",
    "find_key",
    "nothing_to_analyse",
    "PositionTable",
    "extract_tables",
    "first_layer_attention",
    "optimizer_states",
    "sinusoid_settings",
    "trained_positions",
    "load_checkpoint",
    "model_args",
    "model_family",
    "token_embedding",
]
