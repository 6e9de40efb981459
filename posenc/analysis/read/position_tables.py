"""Position tables inside a loaded fairseq checkpoint (:mod:`posenc.analysis.read.fairseq_checkpoint`
unpickles it and reads its arguments).

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

Sides with a relative attention bias (t5, alibi) have no table; :mod:`posenc.analysis.read.relative_bias`
rebuilds their bias. A rope side has neither and is listed with a note.

A side's kind is what the args record, else what its state-dict keys show; what is read of it
(a table, the sinusoid, a bias, or nothing) is what the kind's registration says
(:mod:`posenc.kinds`). A kind this process does not know (registered outside the package) keeps its
recorded name, and its table is read where the state dict has one.

The rules of the plugin are imported, never restated: which kinds the stock flags ask for and how
many positions a side serves (:mod:`posenc.encodings.defaults`), what a sinusoid base may be
(:func:`posenc.encodings.sinusoidal.check_base`), the kinds and their state-dict keys
(:mod:`posenc.kinds`).
"""

from dataclasses import dataclass, field

import torch

from posenc.analysis.read.fairseq_checkpoint import CheckpointError, checkpoint_family, embed_dim, find_key, model_args
from posenc.analysis.read.optimizer_state import trained_positions
from posenc.encodings.defaults import (
    SINUSOID_BASE,
    SINUSOID_VARIANT,
    default_sinusoidal_scale,
    stock_position_kinds,
    usable_positions,
)
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS, check_base, model_sinusoid_table
from posenc.kinds import (
    BIAS,
    POSITION_KEY,
    QUERIES_KEYS,
    REBUILT,
    SINUSOID,
    TABLE,
    VECTORS,
    find_kind,
    kind_options,
    option_fields,
    registered_kinds,
)

SIDES = ("encoder", "decoder")
DEFAULT_MAX_POSITIONS = 1024  # fairseq's default --max-source/target-positions


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


def recognised_kind(side: str, args: dict, family: str, state: dict) -> str:
    """A side's kind: as the args record it (the plugin records both sides' kinds); in a checkpoint
    that does not record it (stock fairseq, or written before the plugin did), the first
    registered kind whose state-dict markers are there (``posenc.kinds``), else the kind the
    family's stock flags ask for."""
    explicit = args.get(f"{side}_pos")
    if explicit:
        return str(explicit)
    for kind in registered_kinds():
        if any(find_key(state, marker, side) for marker in kind.checkpoint.markers):
            return kind.name
    if family == "transformer":
        return stock_position_kinds(args)[SIDES.index(side)]
    if family == "fconv":
        return "none"  # fconv always has a learned table; without the key the side has none
    return "unknown"


def what_is_read(kind: str, has_table: bool):
    """What the analysis reads of a side of this kind (``posenc.kinds.READS``): as its registration
    says; for a kind this process does not know (registered outside the package), its table where
    the state dict has one."""
    registered = find_kind(kind)
    if registered is None:
        return TABLE if has_table else None
    return registered.checkpoint.reads


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
    try:
        check_base(base)
    except ValueError as exc:
        raise CheckpointError(f"the checkpoint's sinusoidal_base: {exc}") from None
    return {"variant": variant, "scale": scale, "base": base, "defaulted": defaulted}


def _usable_positions(args: dict, side: str, family: str, padding_idx: int) -> int:
    """How many positions the model serves: fconv's argument counts the padding rows too."""
    n = args.get("max_source_positions" if side == "encoder" else "max_target_positions") or DEFAULT_MAX_POSITIONS
    return usable_positions(family, int(n), padding_idx)


def extract_tables(ckpt: dict, padding_idx=None, max_len=None, require_table: bool = True) -> dict:
    """``{side: PositionTable}`` for encoder and decoder; a CheckpointError when neither side has
    a table, unless ``require_table`` is False (a model without positions, e.g. a sweep's
    ``placement=none`` cell).

    A learned table gives the positions ``max_len`` names, else those training reached (when the
    optimizer state tells), else all its rows. A sinusoidal side gives ``max_len`` positions, else
    as many as the model serves."""
    state = ckpt["model"]
    args = model_args(ckpt)
    family = checkpoint_family(args, state)
    out = {}
    for side in SIDES:
        key = find_key(state, POSITION_KEY, side)
        kind = recognised_kind(side, args, family, state)
        reads = what_is_read(kind, key is not None)
        if reads == TABLE and key is not None:
            out[side] = _learned_table(ckpt, side, kind, key, padding_idx, max_len)
        elif reads == SINUSOID:
            out[side] = _rebuilt_sinusoid(ckpt, side, kind, args, family, padding_idx, max_len)
        else:
            out[side] = PositionTable(side, kind, notes=[_tableless_note(kind, side, args)])
    if require_table and all(t.table is None for t in out.values()):
        raise nothing_to_analyse(out)
    return out


def _learned_table(ckpt: dict, side: str, kind: str, key: str, padding_idx, max_len) -> PositionTable:
    """The rows of the state dict's table under ``key`` that are positions: after the padding row,
    cut to ``max_len``, else to the positions training reached."""
    weight = ckpt["model"][key].detach().to(torch.float64)
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
    return PositionTable(side, kind, rows, key, first, pad, weight.size(0), notes, trained_positions=trained)


def _rebuilt_sinusoid(ckpt: dict, side: str, kind: str, args: dict, family: str, padding_idx,
                      max_len) -> PositionTable:
    """A sinusoidal side's table, rebuilt as the model builds it from the settings it records."""
    dim = embed_dim(ckpt, side)
    if dim is None:
        return PositionTable(side, kind, notes=["sinusoidal, but the embedding dimension is unknown"])
    pad = 1 if padding_idx is None else padding_idx
    n = _usable_positions(args, side, family, pad)
    if max_len is not None:
        n = min(n, max_len)
    settings = sinusoid_settings(args, family)
    recorded = recorded_options(kind, args)
    offset = inference_offset(kind, recorded)
    first = pad + 1 + offset
    table = model_sinusoid_table(first + n, int(dim), pad, settings["variant"], settings["scale"],
                                 settings["base"])[first:].to(torch.float64)
    notes = [f"rebuilt as the model builds it: rows {first}..{first + n - 1} of the {settings['variant']} "
             f"sinusoid, base {settings['base']:g}, times {settings['scale']:.6g}"]
    if offset:
        settings["inference_offset"] = offset
        notes.append(f"{kind}: every position shifted by {offset} at inference, as the checkpoint records")
    offsets = _offset_options(kind)
    trained_under = {name: value for name, value in recorded.items()
                     if not name.startswith("sinusoidal_") and name not in offsets}
    if trained_under:  # a sinusoid that training moved at random (SHAPE, CAPE): how far
        settings["trained_under"] = trained_under
        ranges = ", ".join(f"{name} {value:g}" for name, value in trained_under.items() if value is not None)
        notes.append(f"{kind}: the sinusoid at inference; in training its positions moved at random "
                     f"within {ranges or 'ranges the checkpoint does not record'}")
    if settings["defaulted"]:
        notes.append("not recorded in the checkpoint, the plugin's defaults used: "
                     f"{', '.join(settings['defaulted'])}")
    source = f"closed form ({settings['variant']} variant; no weights in the checkpoint)"
    return PositionTable(side, kind, table, source, pad + 1, pad, 0, notes, settings=settings)


def _rotates(kind: str) -> bool:
    registered = find_kind(kind)
    return registered is not None and registered.acts == QUERIES_KEYS


def _offset_options(kind: str) -> set:
    """The names of a kind's options that shift every position at inference (``inference_offset``)."""
    registered = find_kind(kind)
    if registered is None:
        return set()
    return {f.name for f in option_fields(registered.options) if f.metadata.get("inference_offset")}


def inference_offset(kind: str, recorded: dict) -> int:
    """How far a kind shifts every position at inference, from its recorded options; 0 where the
    checkpoint records none (it was written before the option existed, when there was no shift)."""
    return sum(int(recorded.get(name) or 0) for name in sorted(_offset_options(kind)))


def recorded_options(kind: str, args: dict) -> dict:
    """A kind's options as the checkpoint records them (``{}`` for a kind without options or one
    this process does not know); a field it does not record is None."""
    registered = find_kind(kind)
    return kind_options(registered, args) if registered is not None else {}


def _options_text(kind: str, args: dict) -> str:
    options = recorded_options(kind, args)
    return ", ".join(f"{name} {value:g}" if isinstance(value, (int, float)) else f"{name} {value}"
                     for name, value in options.items() if value is not None)


def _tableless_note(kind: str, side: str, args: dict) -> str:
    """Why a side has no table, in the reader's terms."""
    options = _options_text(kind, args)
    options = f" ({options})" if options else ""
    if _rotates(kind):
        return f"{kind} rotates queries and keys inside self-attention{options}: no position table or bias to analyse"
    reads = what_is_read(kind, False)
    if reads == BIAS:
        return (f"{kind}: a relative bias on the self-attention logits, no position table "
                "(its bias is under relative_bias)")
    if reads == VECTORS:
        return (f"{kind}{options}: relative vectors added to the keys and values of self-attention, no position "
                "table (they are under relative_vectors)")
    return f"no {POSITION_KEY.format(side=side)} in the state dict"


def nothing_to_analyse(tables: dict, why=None) -> CheckpointError:
    """The one-line error of a checkpoint with neither a position table nor a relative attention
    bias on any side; ``why``: ``{side: reason}`` for sides whose bias could not be rebuilt."""
    looked = ", ".join(POSITION_KEY.format(side=s) for s in SIDES)
    kinds = ", ".join(f"{s}: {t.kind}" + (f" ({why[s]})" if why and why.get(s) else "") for s, t in tables.items())
    rebuilt = [k.name for k in registered_kinds() if k.checkpoint.reads in (SINUSOID, *REBUILT)]
    settings = ", ".join(rebuilt[:-1]) + (" or " if len(rebuilt) > 1 else "") + rebuilt[-1]
    message = (f"no position table or relative attention bias in the checkpoint: looked for {looked} "
               f"(and a {settings} setting in its cfg/args; found {kinds})")
    rotating = list(dict.fromkeys(t.kind for t in tables.values() if _rotates(t.kind)))
    if rotating:
        one = len(rotating) == 1
        message += (f"; {' and '.join(rotating)} rotate{'s' if one else ''} queries and keys and "
                    f"leave{'s' if one else ''} nothing to analyse")
    return CheckpointError(message)
