"""The one home of the allowed placements and of the position kinds: the kinds' registry.

A position kind is one module in ``posenc/encodings/`` (plain torch) plus one registration here,
``register_kind``, which says which model families it serves, where it acts (added to the token
embeddings, or inside a side's self-attention), how it is built for a side, which flags it has
(an options dataclass, as fairseq's ``register_model(name, dataclass=...)``; the plugin turns its
fields into flags and resolves them into the args, so checkpoints record them) and how the
analysis recognises and rebuilds it in a checkpoint. The plugin builds every kind through its
registration, the analysis recognises kinds through theirs, and the harness, the report and the
tests take the allowed kinds from here instead of listing them again.

The registry is read live: ``kind_names()``, ``pe_kinds()`` and the rest answer from the
registrations made so far, so a kind registered from outside the package (a fairseq ``--user-dir``
of its own, a user's kinds module) is seen wherever the built-in ones are. ``BUILTIN_KINDS`` are the
ones this module registers (the contracts name them).

Plain data, no torch or fairseq import: the harness (whose Hydra parent must not import torch) and
the report import this module. A built-in kind names its builder (and its analysis rebuild) as
``"module:function"``, imported when used; a kind registered from outside may give the functions.
"""

import dataclasses
import importlib
import math
import re
from dataclasses import dataclass, field

from posenc.encodings.defaults import (
    CAPE_MAX_GLOBAL_SCALING,
    CAPE_MAX_GLOBAL_SHIFT,
    CAPE_MAX_LOCAL_SHIFT,
    ROPE_BASE,
    SHAPE_MAX_SHIFT,
    SHAW_HEADS,
    SHAW_MAX_DISTANCE,
    SINUSOID_BASE,
    SINUSOID_VARIANT,
    SINUSOID_VARIANTS,
    check_base,
    default_sinusoidal_scale,
)

# Where a sweep puts positions: both sides, the source (encoder) side only, the target (decoder)
# side only, or neither.
PLACEMENTS = ("both", "source", "target", "none")

# The model families of the plugin (posenc_fconv, posenc_transformer).
FAMILIES = ("fconv", "transformer")

# Where a kind acts on a side (``register_kind`` gives each its module's call contract):
EMBEDDINGS = "embeddings"      # a term added to the token embeddings (the side's ``embed_positions``)
QUERIES_KEYS = "queries_keys"  # a rotation of the queries and keys of the side's self-attention
LOGITS = "logits"              # a term added to the side's self-attention logits (may read the queries)
KEYS_VALUES = "keys_values"    # a term added to the keys and one added to the values (Shaw et al. 2018)
ACTS = (EMBEDDINGS, QUERIES_KEYS, LOGITS, KEYS_VALUES)
# fconv has no self-attention to rotate, bias or extend: only kinds that act on the embeddings.
FAMILY_ACTS = {"fconv": (EMBEDDINGS,), "transformer": ACTS}

# What posenc-pe reads of a kind in a checkpoint (posenc.analysis.read.position_tables):
TABLE = "table"          # the rows of ``{side}.embed_positions.weight``
SINUSOID = "sinusoid"    # the sinusoid rebuilt from the settings the checkpoint records
BIAS = "bias"            # a relative attention bias per head and distance, rebuilt by the kind's ``rebuild``
VECTORS = "vectors"      # relative key/value vectors per layer and distance, rebuilt by the kind's ``rebuild``
READS = (TABLE, SINUSOID, BIAS, VECTORS, None)  # None: nothing to analyse
REBUILT = (BIAS, VECTORS)  # the reads that need the kind's own ``rebuild``

# State-dict keys of the plugin's position modules ({side}: encoder | decoder), which the analysis reads.
POSITION_KEY = "{side}.embed_positions.weight"            # a learned table
RELATIVE_BIAS_KEY = "{side}.relative_attention_bias.weight"  # T5's (num_buckets, H), shared by a side's layers
RELATIVE_KEYS_KEY = "{side}.layers.{layer}.self_attn.relative.keys.weight"  # Shaw's a^K, (2k+1, head_dim)
RELATIVE_VALUES_KEY = "{side}.layers.{layer}.self_attn.relative.values.weight"  # Shaw's a^V, (2k+1, head_dim)
SINUSOID_MARKERS = ("{side}.embed_positions._float_tensor", "{side}.embed_positions.weights")  # older fairseq files

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def resolve_callable(target):
    """A callable given as itself or as ``"module:function"``."""
    if isinstance(target, str):
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(module), function)
    return target


def _callable_or_path(value) -> bool:
    return callable(value) or (isinstance(value, str) and ":" in value)


# A built-in kind's ``InCheckpoint.rebuild``: the analysis, which reads checkpoints, registers the
# rebuild itself; this registry names none of its modules.
BY_THE_ANALYSIS = "by the analysis"


@dataclass(frozen=True)
class InCheckpoint:
    """How the analysis recognises a kind in a checkpoint. ``markers``: state-dict keys (``{side}``
    filled in) that show the kind on a side whose arguments do not record it (a stock fairseq
    checkpoint, or one written before the plugin recorded kinds); ``reads``: one of ``READS``;
    ``rebuild``: for ``BIAS`` and ``VECTORS``, ``rebuild(ckpt, side, max_len) -> (result, why)``
    (a callable or ``"module:function"``; ``posenc.analysis.read.relative_bias`` and ``.relative_vectors``
    say what ``result`` is), ``result`` None with ``why`` when it cannot; ``BY_THE_ANALYSIS`` for a
    built-in kind, whose rebuild the analysis registers itself (``posenc.analysis.read.rebuilds``)."""
    markers: tuple = ()
    reads: str = None
    rebuild: object = field(default=None, repr=False)


# --- options: a kind's flags ---------------------------------------------------------------------
# An options dataclass holds a kind's settings. Each field is a flag (``--`` + the name with dashes)
# and an attribute of fairseq's args under its own name, resolved to its default when unset, so the
# checkpoint records what the model used. ``field(metadata=...)`` may hold ``help``, ``choices``,
# ``type`` (text -> value, raising ValueError; without it, an annotation int/float/str converts) and
# ``family_default`` (a function of the family, used when the field's default is None), ``same_as``
# (the name of an option declared before it, whose resolved value is its default when its own is
# None), ``recorded_before`` (what arguments resolved before the option existed meant: they record
# its ``same_as`` but not the option itself) and ``inference_offset`` (True: a shift of every
# position at inference, which ``posenc-pe`` applies where it rebuilds the table). Kinds may
# share one dataclass (``sinusoidal``, ``shape`` and ``cape`` share the sinusoid's), or extend one by
# inheritance; one name is one flag: two dataclasses that declare the same field name differently
# are refused.


def option(default, help: str, **metadata):
    """A field of an options dataclass with its help text (and ``choices``, ``type``, ``family_default``)."""
    return field(default=default, metadata={"help": help, **metadata})


def _base(text) -> float:
    return check_base(float(text))


def _at_least(minimum):
    def check(text) -> float:
        value = float(text)
        if not (math.isfinite(value) and value >= minimum):
            raise ValueError(f"must be a finite number >= {minimum:g}, got {value:g}")
        return value
    return check


def _whole(minimum):
    def check(text) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(f"must be a whole number >= {minimum}, got {value}")
        return value
    return check


@dataclass
class SinusoidOptions:
    """The sinusoid's settings (``sinusoidal``, and the sinusoid under ``shape`` and ``cape``)."""
    sinusoidal_variant: str = option(SINUSOID_VARIANT, "sinusoid layout: fairseq's concatenated halves (default) "
                                     "or the paper's interleaved pairs", choices=SINUSOID_VARIANTS)
    sinusoidal_scale: float = option(None, "multiplier of the sinusoid table (default: 1 for the transformer; for "
                                     "fconv the learned table's initial norm over the sinusoid's, 0.1*sqrt(2))",
                                     type=float, family_default=default_sinusoidal_scale)
    sinusoidal_base: float = option(SINUSOID_BASE, f"base b of the sinusoid's wavelengths 2*pi .. ~2*pi*b "
                                    f"(default {SINUSOID_BASE:g})", type=_base)


@dataclass
class RopeOptions:
    rope_base: float = option(ROPE_BASE, f"RoPE base of the rotation frequencies (default {ROPE_BASE:g})", type=_base)


@dataclass
class ShawOptions:
    shaw_max_distance: int = option(SHAW_MAX_DISTANCE, "Shaw et al.'s clipping distance k: distances beyond +-k "
                                    f"share the last vector (default {SHAW_MAX_DISTANCE})", type=_whole(1))
    shaw_heads: str = option(SHAW_HEADS[0], "Shaw et al.'s vectors: one set per layer shared by its heads (default, "
                             "the paper's sec. 3.3 and tensor2tensor) or one per layer and head (per_head, its "
                             "sec. 4.1's base model)", choices=SHAW_HEADS)


@dataclass
class ShapeOptions(SinusoidOptions):
    shape_max_shift: int = option(SHAPE_MAX_SHIFT, "SHAPE's number K of random shifts of a sequence's positions in "
                                  f"training, k drawn from 0..K-1 as the authors' code draws it (default "
                                  f"{SHAPE_MAX_SHIFT}; 0: no shift)", type=_whole(0))
    shape_eval_offset: int = option(None, "SHAPE's shift of every position at validation and inference (default: "
                                    "K, as the authors decode; 0: the plain sinusoid, as sinusoidal)",
                                    type=_whole(0), same_as="shape_max_shift", recorded_before=0,
                                    inference_offset=True)


@dataclass
class CapeOptions(SinusoidOptions):
    cape_max_global_shift: float = option(CAPE_MAX_GLOBAL_SHIFT, "CAPE's global shift: Delta ~ U[-this, this] "
                                          f"per sequence in training (default {CAPE_MAX_GLOBAL_SHIFT:g})",
                                          type=_at_least(0))
    cape_max_local_shift: float = option(CAPE_MAX_LOCAL_SHIFT, "CAPE's local shift: epsilon_i ~ U[-this, this] per "
                                         f"position in training (default {CAPE_MAX_LOCAL_SHIFT:g})",
                                         type=_at_least(0))
    cape_max_global_scaling: float = option(CAPE_MAX_GLOBAL_SCALING, "CAPE's global scaling: log lambda ~ "
                                            "U[-log this, log this] per sequence in training (default "
                                            f"{CAPE_MAX_GLOBAL_SCALING:g}; 1 = none)", type=_at_least(1))


def option_fields(options) -> tuple:
    """The ``dataclasses.Field``s of an options dataclass (() for None)."""
    return dataclasses.fields(options) if options is not None else ()


_PLAIN_TYPES = {int: int, float: float, str: str, "int": int, "float": float, "str": str}


def option_parser(f):
    """How a field's flag text becomes its value: the field's ``type`` metadata, else its annotation
    when that is ``int``, ``float`` or ``str``; None leaves the text as it is."""
    return f.metadata.get("type") or _PLAIN_TYPES.get(f.type)


def option_default(f, family: str, args=None):
    """The value an unset field resolves to for ``family`` (a ``same_as`` field: that option's value
    in ``args``, a Namespace or a dict, resolved first)."""
    if f.default is None and "family_default" in f.metadata:
        return f.metadata["family_default"](family)
    if f.default is None and "same_as" in f.metadata:
        get = args.get if isinstance(args, dict) else (lambda name: getattr(args, name, None))
        return get(f.metadata["same_as"]) if args is not None else None
    return f.default


def recorded_before(f, args) -> bool:
    """Whether ``args`` (a Namespace or a dict) were resolved before option ``f`` existed: they
    record the option it follows (``same_as``) but not ``f`` itself. Then ``f`` means its
    ``recorded_before`` value (what the kind did before the option), not its default."""
    if "recorded_before" not in f.metadata or args is None:
        return False
    has = (lambda name: name in args) if isinstance(args, dict) else (lambda name: hasattr(args, name))
    get = args.get if isinstance(args, dict) else (lambda name: getattr(args, name, None))
    return not has(f.name) and get(f.metadata["same_as"]) is not None


def kind_options(kind, args) -> dict:
    """``{field: value}`` of a kind's options as ``args`` (a Namespace or a dict) record them;
    None for a field they do not record."""
    get = args.get if isinstance(args, dict) else (lambda name: getattr(args, name, None))
    return {f.name: get(f.name) for f in option_fields(kind.options)}


@dataclass(frozen=True)
class Side:
    """What a kind's builder gets for one side of one model."""
    family: str              # one of FAMILIES
    side: str                # encoder | decoder (the decoder's self-attention is causal)
    embed_dim: int
    padding_idx: int         # the first real token sits at position padding_idx + 1
    max_positions_arg: int   # --max-source-positions / --max-target-positions as given
    max_positions: int       # what the side reports: the stock learned model's limit
    num_heads: int = None    # self-attention heads (Transformer); None for fconv
    stock_table: object = None  # the stock model's position module of this side, or None
    args: object = None      # the model's resolved arguments (a kind reads its options there)

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @property
    def causal(self) -> bool:
        """Whether the side's self-attention is causal (the decoder's)."""
        return self.side == "decoder"


@dataclass(frozen=True)
class PositionKind:
    """One registration (see ``register_kind``)."""
    name: str
    families: tuple
    acts: str
    builder: object = field(repr=False)  # a callable ``builder(side: Side)`` or "module:function"
    checkpoint: InCheckpoint = InCheckpoint()
    options: type = None  # an options dataclass (its fields are the kind's flags), or None
    revision: int = 0     # bumped when the kind's behaviour changes: it enters the cells' hashes (see register_kind)

    def build(self, side: Side):
        """The kind's module for ``side`` (None where the side needs none)."""
        return resolve_callable(self.builder)(side)


_REGISTRY = {}  # name -> PositionKind, in registration order


def _check_options(name: str, options) -> None:
    if options is None:
        return
    if not (isinstance(options, type) and dataclasses.is_dataclass(options)):
        raise ValueError(f"position kind {name!r}: options must be a dataclass (its fields are the kind's flags), "
                         f"got {options!r}")
    taken = {f.name: (k.name, f) for k in _REGISTRY.values() for f in option_fields(k.options)}
    seen = set()
    for f in dataclasses.fields(options):
        if not _NAME.fullmatch(f.name) or f.name in ("encoder_pos", "decoder_pos"):
            raise ValueError(f"position kind {name!r}: option {f.name!r} is not allowed; allowed: lower-case "
                             "letters, digits and _, starting with a letter, other than encoder_pos/decoder_pos")
        if f.default is dataclasses.MISSING or (f.default is None and "family_default" not in f.metadata
                                                 and "same_as" not in f.metadata):
            raise ValueError(f"position kind {name!r}: option {f.name!r} needs a default (or None with a "
                             "family_default or same_as), so that an unset flag resolves to a value the checkpoint "
                             "records")
        if "same_as" in f.metadata and f.metadata["same_as"] not in seen:
            raise ValueError(f"position kind {name!r}: option {f.name!r} is the same as "
                             f"{f.metadata['same_as']!r}, which must be an option declared before it")
        seen.add(f.name)
        owner = taken.get(f.name)
        if owner is not None and owner[1] is not f:
            raise ValueError(f"position kind {name!r}: option {f.name!r} is already the option of kind "
                             f"{owner[0]!r}; allowed: a name of its own, or that kind's options dataclass itself")


def register_kind(name: str, *, families, acts: str, build=None, checkpoint: InCheckpoint = InCheckpoint(),
                  options: type = None, revision: int = 0):
    """Register a position kind. Without ``build``, a decorator for the builder (as fairseq's
    ``register_model``); it returns the builder unchanged.

    ``families``: the ones of ``FAMILIES`` it serves. ``acts``: one of ``ACTS`` (fconv hosts
    ``EMBEDDINGS`` only). ``build(side: Side)`` returns the side's module, by ``acts``:

    - ``EMBEDDINGS``: what goes into ``embed_positions``: ``module(tokens, incremental_state=None)``
      -> ``(B, T, D)``, the newest position's ``(B or 1, 1, D)`` in a decoding step, with a
      ``max_positions`` attribute; it may behave differently while ``module.training`` (SHAPE,
      CAPE). None for none at all, which fconv does not allow.
    - ``QUERIES_KEYS``: one module per self-attention layer, ``module(x, offset)`` on
      ``(B, H, T, head_dim)`` queries and keys at positions ``offset ..``.
    - ``LOGITS``: one module per side, shared by its layers (``{side}.relative_attention_bias``):
      ``module(q_len, k_len, offset, dtype=)`` -> ``(H, q_len, k_len)`` added to the scaled logits;
      a module with ``uses_query = True`` is also given ``query=`` the scaled queries
      ``(B, H, q_len, head_dim)`` and may return ``(B, H, q_len, k_len)``.
    - ``KEYS_VALUES``: one module per self-attention layer (``self_attn.relative``):
      ``module.key_logits(q, k_len, offset)`` -> ``(B, H, q_len, k_len)``, the logits' term of the
      keys' addition (``q . a^K_ij`` for the scaled queries ``q``), and
      ``module.value_term(weights, offset)`` -> ``(B, H, q_len, head_dim)``, the values' addition
      weighted by the attention ``(B, H, q_len, k_len)`` (``sum_j alpha_ij a^V_ij``).

    Queries sit at positions ``offset ..`` (the cached steps in a decoding step), keys at ``0 ..``.
    ``checkpoint``: how posenc-pe recognises and reads it. ``options``: its flags (see ``option``).
    ``revision``: a whole number, 0 at first, raised when what the kind does changes, so that the
    harness does not keep cells trained with the old behaviour: a cell whose kinds have revisions
    above 0 hashes them with its config (``posenc.harness.hashing``); at 0 the hashes are as before
    revisions existed.
    A name may be registered once; any mistake raises ValueError naming what is allowed.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"position kind name {name!r} is not allowed; allowed: lower-case letters, digits and _, "
                         "starting with a letter")
    if name in _REGISTRY:
        raise ValueError(f"position kind {name!r} is already registered")
    families = (families,) if isinstance(families, str) else tuple(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise ValueError(f"position kind {name!r}: families {', '.join(map(str, unknown)) or '(none)'} not allowed; "
                         f"allowed: {', '.join(FAMILIES)}")
    if acts not in ACTS:
        raise ValueError(f"position kind {name!r}: acts={acts!r} is not allowed; allowed: {', '.join(ACTS)}")
    for family in families:
        if acts not in FAMILY_ACTS[family]:
            raise ValueError(f"position kind {name!r}: {family} cannot host a kind that acts on {acts}; allowed: "
                             f"{', '.join(FAMILY_ACTS[family])}")
    if checkpoint.reads not in READS:
        raise ValueError(f"position kind {name!r}: reads={checkpoint.reads!r} is not allowed; allowed: "
                         f"{', '.join(map(str, READS))}")
    if checkpoint.reads in REBUILT and not (_callable_or_path(checkpoint.rebuild) or
                                            checkpoint.rebuild == BY_THE_ANALYSIS):
        raise ValueError(f"position kind {name!r}: reads={checkpoint.reads!r} needs a rebuild, a callable or "
                         "'module:function'")
    _check_options(name, options)
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
        raise ValueError(f"position kind {name!r}: revision={revision!r} is not allowed; allowed: a whole number >= 0")

    def register(builder):
        if not _callable_or_path(builder):
            raise ValueError(f"position kind {name!r}: build must be a callable or 'module:function'")
        _REGISTRY[name] = PositionKind(name, families, acts, builder, checkpoint, options, revision)
        return builder

    if build is None:
        return register
    register(build)
    return _REGISTRY[name]


def registered_kinds(family: str = None) -> tuple:
    """The registrations, in registration order; those serving ``family`` if given."""
    return tuple(k for k in _REGISTRY.values() if family is None or family in k.families)


def kind_names(family: str = None) -> tuple:
    """The names of the registered kinds (of ``family``, if given; () for an unknown family)."""
    return tuple(k.name for k in registered_kinds(family))


def kinds_acting(*acts: str) -> tuple:
    """The names of the registered kinds that act on one of ``acts``."""
    return tuple(k.name for k in registered_kinds() if k.acts in acts)


def find_kind(name: str):
    """The registration of ``name``, or None."""
    return _REGISTRY.get(name)


def position_kind(name: str) -> PositionKind:
    """The registration of ``name``; a ValueError naming the registered kinds if there is none."""
    kind = _REGISTRY.get(name)
    if kind is None:
        raise ValueError(f"unknown position kind {name!r}; allowed: {', '.join(_REGISTRY)}")
    return kind


def family_options(family: str) -> tuple:
    """The option fields of the kinds ``family`` serves, each once, in registration order."""
    seen = {}
    for kind in registered_kinds(family):
        for f in option_fields(kind.options):
            seen.setdefault(f.name, f)
    return tuple(seen.values())


def position_settings(family: str = None) -> tuple:
    """The names the plugin resolves into a model's args (so checkpoints record them): the two
    kinds and every option of the registered kinds (of ``family``, if given)."""
    families = FAMILIES if family is None else (family,)
    names = dict.fromkeys(["encoder_pos", "decoder_pos"])
    for fam in families:
        names.update(dict.fromkeys(f.name for f in family_options(fam)))
    return tuple(names)


# --- the built-in kinds -------------------------------------------------------------------------
# ``alibi`` (Press et al. 2022) and ``t5`` (Raffel et al. 2020) are biases on the attention logits;
# ``shaw`` (Shaw et al. 2018) adds learned vectors of the clipped distance to keys and values;
# ``shape`` (Kiyono et al. 2021) and ``cape`` (Likhomanenko et al. 2021) move the sinusoid's
# positions at random while training; ``none`` means no position signal on that side (a zero term
# where fconv adds one unconditionally).

register_kind("learned", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.learned:build_side",
              checkpoint=InCheckpoint(markers=(POSITION_KEY,), reads=TABLE))
register_kind("sinusoidal", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.sinusoidal:build_side",
              checkpoint=InCheckpoint(markers=SINUSOID_MARKERS, reads=SINUSOID), options=SinusoidOptions)
register_kind("rope", families=("transformer",), acts=QUERIES_KEYS, build="posenc.encodings.rotary:build_side",
              options=RopeOptions)
register_kind("alibi", families=("transformer",), acts=LOGITS, build="posenc.encodings.attention_bias:build_alibi",
              checkpoint=InCheckpoint(reads=BIAS, rebuild=BY_THE_ANALYSIS))
register_kind("t5", families=("transformer",), acts=LOGITS, build="posenc.encodings.attention_bias:build_t5",
              checkpoint=InCheckpoint(markers=(RELATIVE_BIAS_KEY,), reads=BIAS,
                                      rebuild=BY_THE_ANALYSIS))
register_kind("none", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.none:build_side")
register_kind("shaw", families=("transformer",), acts=KEYS_VALUES, build="posenc.encodings.shaw:build_side",
              checkpoint=InCheckpoint(markers=(RELATIVE_KEYS_KEY.replace("{layer}", "0"),), reads=VECTORS,
                                      rebuild=BY_THE_ANALYSIS),
              options=ShawOptions)
# Revision 1 of ``shape`` (issue 40): k from 0..K-1 and positions shifted by K at inference, as the
# authors run it, drawn from a generator of its own; of ``cape``: its draws from a generator of its
# own, so the cells' dropout masks are those of ``sinusoidal``.
register_kind("shape", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.shifted:build_shape",
              checkpoint=InCheckpoint(reads=SINUSOID), options=ShapeOptions, revision=1)
register_kind("cape", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.shifted:build_cape",
              checkpoint=InCheckpoint(reads=SINUSOID), options=CapeOptions, revision=1)

# The kinds registered above, in this order (the contracts and the presets name them); the registry
# itself may hold more, registered later from outside the package.
BUILTIN_KINDS = kind_names()


def kind_revisions(kinds) -> dict:
    """``{kind: revision}`` of the registered ones among ``kinds`` whose revision is above 0."""
    found = {name: find_kind(name) for name in kinds}
    return {name: kind.revision for name, kind in sorted(found.items()) if kind is not None and kind.revision}


def pe_kinds(family: str = None) -> tuple:
    """What ``pe=`` may name (of ``family``, if given): a registered kind that ``placement`` puts
    somewhere (``none`` is a placement)."""
    return tuple(k for k in kind_names(family) if k != "none")


def side_kinds(placement: str, pe: str):
    """``(encoder kind, decoder kind)`` of a placement and a kind: ``source`` -> (pe, none)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    return (pe if placement in ("both", "source") else "none",
            pe if placement in ("both", "target") else "none")


def family_pe_kinds(family: str):
    """The ``pe=`` values a family can do."""
    return pe_kinds(family) if family in FAMILIES else ()


def grid_skip_reason(family: str, pe: str, placement: str):
    """Why a grid sweep leaves a cell out, or None: a kind the family cannot do, or a repeat of
    the kind-free ``none`` placement (run once, under ``pe=learned``)."""
    if pe not in family_pe_kinds(family):
        return f"{family} cannot do pe={pe}"
    if placement == "none" and pe != "learned":
        return "placement=none has no kind; it runs once, as pe=learned"
    return None
