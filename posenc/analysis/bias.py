"""The address ``posenc/kinds.py`` gives the built-in bias rebuilds (``"posenc.analysis.bias:rebuild_t5"``):
they live in :mod:`posenc.analysis.read.relative_bias`. This module keeps that address working
until the registry names the new home; it holds nothing of its own."""

from posenc.analysis.read.relative_bias import rebuild_alibi, rebuild_t5

__all__ = ["rebuild_alibi", "rebuild_t5"]
