"""The one home of the allowed placements and position kinds.

Plain data, no torch or fairseq import: the plugin, the harness (whose Hydra parent must not import
torch), the report and the tests all import these names instead of listing them again.
"""

# Where a sweep puts positions: both sides, the source (encoder) side only, the target (decoder)
# side only, or neither.
PLACEMENTS = ("both", "source", "target", "none")

# Every position kind a side can have; ``none`` means no position signal on that side.
# ``alibi`` (Press et al. 2022) and ``t5`` (Raffel et al. 2020) are biases on the attention logits.
KINDS = ("learned", "sinusoidal", "rope", "alibi", "t5", "none")

# The kinds each model family can build. fconv has no attention logits to rotate or bias.
FAMILY_KINDS = {
    "fconv": ("learned", "sinusoidal", "none"),
    "transformer": ("learned", "sinusoidal", "rope", "alibi", "t5", "none"),
}

# Kinds that add a bias, a function of the relative distance key - query, to a side's
# self-attention logits.
ATTENTION_BIAS_KINDS = ("alibi", "t5")

# Kinds that act inside a side's self-attention and add nothing to the token embeddings.
SELF_ATTENTION_KINDS = ("rope",) + ATTENTION_BIAS_KINDS

# What ``pe=`` may name: a kind that ``placement`` puts somewhere (``none`` is a placement).
PE_KINDS = tuple(k for k in KINDS if k != "none")


def side_kinds(placement: str, pe: str):
    """``(encoder kind, decoder kind)`` of a placement and a kind: ``source`` -> (pe, none)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    return (pe if placement in ("both", "source") else "none",
            pe if placement in ("both", "target") else "none")


def family_pe_kinds(family: str):
    """The ``pe=`` values a family can do."""
    return tuple(k for k in FAMILY_KINDS.get(family, ()) if k != "none")


def grid_skip_reason(family: str, pe: str, placement: str):
    """Why a grid sweep leaves a cell out, or None: a kind the family cannot do, or a repeat of
    the kind-free ``none`` placement (run once, under ``pe=learned``)."""
    if pe not in family_pe_kinds(family):
        return f"{family} cannot do pe={pe}"
    if placement == "none" and pe != "learned":
        return "placement=none has no kind; it runs once, as pe=learned"
    return None
