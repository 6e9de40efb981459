"""One home for a cell: what its directory holds (``layout``), what its ``result.json`` says
(``record``), which configuration keys never change it (``keys``), the cells a sweep planned
(``plan``) and a sweep as every reader sees it (``sweep``).

Torch-free and below every other package: the harness writes cells with these names, the report
and the analysis read them back with the same ones.
"""
