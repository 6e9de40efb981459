"""The analysis's own rebuilds of the built-in kinds it reads through a rebuild (``posenc.kinds.REBUILT``:
a relative bias, relative vectors), each registered by the module that defines it
(``relative_bias``, ``relative_vectors``; the package imports both). A kind from outside brings
its own: ``InCheckpoint.rebuild``, a callable or ``"module:function"``.

``rebuild(ckpt, side, max_len) -> (result, why)``: ``result`` None with ``why`` when it cannot.
"""

from posenc.kinds import BY_THE_ANALYSIS, PositionKind, resolve_callable

_REBUILDS = {}  # kind name -> rebuild


def register_rebuild(kind: str, rebuild) -> None:
    """The analysis's rebuild of the built-in ``kind`` (whose registration says ``BY_THE_ANALYSIS``)."""
    _REBUILDS[kind] = rebuild


def rebuilder(kind: PositionKind):
    """The rebuild of a registered kind: its registration's own, or the analysis's for a built-in
    one; None where it has neither."""
    own = kind.checkpoint.rebuild
    if own is None or own == BY_THE_ANALYSIS:
        return _REBUILDS.get(kind.name)
    return resolve_callable(own)
