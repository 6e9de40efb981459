"""Position-encoding analysis (``posenc-pe``): the seed's exercises 3.1 to 3.3 on the sinusoid
(and what its base changes), the proximity properties of Wang et al. (ICLR 2021) of the dot
product and of the first layer's attention logits, the probes of Wang & Chen (EMNLP 2020), and
the same measurements on the position tables inside a fairseq checkpoint or every cell of a sweep,
and the relative attention biases (t5, alibi) per head against the distance key - query.

It reads tables, checkpoints and result records; it never imports fairseq or the harness. Three
rooms by job, importing one way: ``read`` (checkpoints into tables, biases and vectors) <-
``measure`` (the numbers) <- ``write`` (the files), with ``cli`` (``posenc-pe``) on top.

Conventions: a *table* is a ``(N, D)`` tensor whose row ``p`` is PE(p), ``p = 0 .. N-1`` (no
padding row). Sinusoid *variants* are ``paper`` (interleaved sin/cos) and ``fairseq``
(concatenated halves), as in :mod:`posenc.encodings.sinusoidal`.
"""

from posenc.analysis.measure.relative_linear import (
    factorisation_check,
    fit_shift_lstsq,
    pair_columns,
    relative_linear_errors,
    shift_matrix,
)

__all__ = [
    "factorisation_check",
    "fit_shift_lstsq",
    "pair_columns",
    "relative_linear_errors",
    "shift_matrix",
]
