"""The address ``posenc/kinds.py`` gives the built-in relative-vector rebuild
(``"posenc.analysis.vectors:rebuild_shaw"``): it lives in :mod:`posenc.analysis.read.relative_vectors`.
This module keeps that address working until the registry names the new home; it holds nothing of
its own."""

from posenc.analysis.read.relative_vectors import rebuild_shaw

__all__ = ["rebuild_shaw"]
