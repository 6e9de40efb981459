"""The one home of the allowed placements and of the position kinds: the kinds' registry.

A position kind is one module in ``posenc/encodings/`` (plain torch) plus one registration here,
``register_kind``, which says which model families it serves, where it acts (added to the token
embeddings, or inside a side's self-attention), how it is built for a side, and how the analysis
recognises it in a checkpoint. The plugin builds every kind through its registration, the
analysis recognises kinds through theirs, and the harness, the report and the tests take the
allowed kinds from here instead of listing them again. docs/plugin.md ("Adding a position kind")
shows a kind registered from outside the package.

Plain data, no torch or fairseq import: the harness (whose Hydra parent must not import torch) and
the report import this module. A built-in kind names its builder as ``"module:function"``, imported
when a model is built; a kind registered from outside may give the function itself.
"""

import importlib
import re
from dataclasses import dataclass, field

# Where a sweep puts positions: both sides, the source (encoder) side only, the target (decoder)
# side only, or neither.
PLACEMENTS = ("both", "source", "target", "none")

# The model families of the plugin (posenc_fconv, posenc_transformer).
FAMILIES = ("fconv", "transformer")

# Where a kind acts on a side:
EMBEDDINGS = "embeddings"      # a term added to the token embeddings (the side's ``embed_positions``)
QUERIES_KEYS = "queries_keys"  # applied to the queries and keys of the side's self-attention
LOGITS = "logits"              # a bias added to the side's self-attention logits
ACTS = (EMBEDDINGS, QUERIES_KEYS, LOGITS)
# fconv has no attention logits to rotate or bias: only kinds that act on the embeddings.
FAMILY_ACTS = {"fconv": (EMBEDDINGS,), "transformer": ACTS}

# What posenc-pe reads of a kind in a checkpoint (posenc.analysis.checkpoint):
TABLE = "table"          # the rows of ``{side}.embed_positions.weight``
SINUSOID = "sinusoid"    # the sinusoid rebuilt from the settings the checkpoint records
BIAS = "bias"            # the relative attention bias, rebuilt by posenc.analysis.bias
READS = (TABLE, SINUSOID, BIAS, None)  # None: nothing to analyse

# State-dict keys of the plugin's position modules ({side}: encoder | decoder), which the analysis reads.
POSITION_KEY = "{side}.embed_positions.weight"            # a learned table
RELATIVE_BIAS_KEY = "{side}.relative_attention_bias.weight"  # T5's (num_buckets, H), shared by a side's layers
SINUSOID_MARKERS = ("{side}.embed_positions._float_tensor", "{side}.embed_positions.weights")  # older fairseq files

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class InCheckpoint:
    """How the analysis recognises a kind in a checkpoint. ``markers``: state-dict keys (``{side}``
    filled in) that show the kind on a side whose arguments do not record it (a stock fairseq
    checkpoint, or one written before the plugin recorded kinds); ``reads``: one of ``READS``."""
    markers: tuple = ()
    reads: str = None


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
    args: object = None      # the model's resolved arguments (the built-in kinds read their settings there)


@dataclass(frozen=True)
class PositionKind:
    """One registration (see ``register_kind``)."""
    name: str
    families: tuple
    acts: str
    builder: object = field(repr=False)  # a callable ``builder(side: Side)`` or "module:function"
    checkpoint: InCheckpoint = InCheckpoint()

    def build(self, side: Side):
        """The kind's module for ``side`` (None where the side needs none)."""
        builder = self.builder
        if isinstance(builder, str):
            module, _, function = builder.partition(":")
            builder = getattr(importlib.import_module(module), function)
        return builder(side)


_REGISTRY = {}  # name -> PositionKind, in registration order


def register_kind(name: str, *, families, acts: str, build=None, checkpoint: InCheckpoint = InCheckpoint()):
    """Register a position kind. Without ``build``, a decorator for the builder (as fairseq's
    ``register_model``); it returns the builder unchanged.

    ``families``: the ones of ``FAMILIES`` it serves. ``acts``: one of ``ACTS`` (fconv hosts
    ``EMBEDDINGS`` only). ``build(side: Side)`` returns the side's module: for ``EMBEDDINGS``,
    what goes into ``embed_positions`` (``module(tokens, incremental_state=None)`` ->
    ``(B, T, D)``, the newest position's ``(B or 1, 1, D)`` in a decoding step, with a
    ``max_positions`` attribute; None for none at all, which fconv does not allow); for
    ``QUERIES_KEYS``, ``module(x, offset)`` on ``(B, H, T, head_dim)`` queries and keys at
    positions ``offset ..``, one per self-attention layer; for ``LOGITS``, ``module(q_len, k_len,
    offset, dtype=)`` -> ``(H, q_len, k_len)``, one per side, shared by its layers.
    ``checkpoint``: how posenc-pe recognises and reads it.
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

    def register(builder):
        if not (callable(builder) or (isinstance(builder, str) and ":" in builder)):
            raise ValueError(f"position kind {name!r}: build must be a callable or 'module:function'")
        _REGISTRY[name] = PositionKind(name, families, acts, builder, checkpoint)
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


def find_kind(name: str):
    """The registration of ``name``, or None."""
    return _REGISTRY.get(name)


def position_kind(name: str) -> PositionKind:
    """The registration of ``name``; a ValueError naming the registered kinds if there is none."""
    kind = _REGISTRY.get(name)
    if kind is None:
        raise ValueError(f"unknown position kind {name!r}; allowed: {', '.join(_REGISTRY)}")
    return kind


# --- the built-in kinds -------------------------------------------------------------------------
# ``alibi`` (Press et al. 2022) and ``t5`` (Raffel et al. 2020) are biases on the attention logits;
# ``none`` means no position signal on that side (a zero term where fconv adds one unconditionally).

register_kind("learned", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.learned:build_side",
              checkpoint=InCheckpoint(markers=(POSITION_KEY,), reads=TABLE))
register_kind("sinusoidal", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.sinusoidal:build_side",
              checkpoint=InCheckpoint(markers=SINUSOID_MARKERS, reads=SINUSOID))
register_kind("rope", families=("transformer",), acts=QUERIES_KEYS, build="posenc.encodings.rotary:build_side")
register_kind("alibi", families=("transformer",), acts=LOGITS, build="posenc.encodings.attention_bias:build_alibi",
              checkpoint=InCheckpoint(reads=BIAS))
register_kind("t5", families=("transformer",), acts=LOGITS, build="posenc.encodings.attention_bias:build_t5",
              checkpoint=InCheckpoint(markers=(RELATIVE_BIAS_KEY,), reads=BIAS))
register_kind("none", families=FAMILIES, acts=EMBEDDINGS, build="posenc.encodings.none:build_side")

# The built-in kinds, as registered above (fixed when this module is imported: the contracts, the
# harness's ``pe=`` and the report name these). A kind registered later, from outside the package,
# is seen by the plugin, which reads the registry when fairseq builds its parser and its models.
KINDS = kind_names()
FAMILY_KINDS = {family: kind_names(family) for family in FAMILIES}
# Kinds that add a bias, a function of the relative distance key - query, to a side's
# self-attention logits.
ATTENTION_BIAS_KINDS = tuple(k.name for k in registered_kinds() if k.acts == LOGITS)
# Kinds that act inside a side's self-attention and add nothing to the token embeddings.
SELF_ATTENTION_KINDS = tuple(k.name for k in registered_kinds() if k.acts != EMBEDDINGS)

# What ``pe=`` may name: a kind that ``placement`` puts somewhere (``none`` is a placement).
PE_KINDS = tuple(k for k in KINDS if k != "none")


def side_kinds(placement: str, pe: str):
    """``(encoder kind, decoder kind)`` of a placement and a kind: ``source`` -> (pe, none)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    return (pe if placement in ("both", "source") else "none",
            pe if placement in ("both", "target") else "none")


def family_pe_kinds(family: str = None):
    """The ``pe=`` values a family can do (any family's, if None), read live: a kinds file
    (``kinds_module=``, ``posenc.kinds_file``) registers its kinds after this module is imported."""
    return tuple(k for k in kind_names(family) if k != "none")


def grid_skip_reason(family: str, pe: str, placement: str):
    """Why a grid sweep leaves a cell out, or None: a kind the family cannot do, or a repeat of
    the kind-free ``none`` placement (run once, under ``pe=learned``)."""
    if pe not in family_pe_kinds(family):
        return f"{family} cannot do pe={pe}"
    if placement == "none" and pe != "learned":
        return "placement=none has no kind; it runs once, as pe=learned"
    return None
