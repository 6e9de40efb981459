"""The statistics room, below both the report and the harness: the verdict's test (``verdict``),
power and the seeds to book (``power``), the group sequential design (``sequential``: thresholds
by error spending, conditional power, graphical Holm), the old seeds strategy's stopping rule
(``seeds``) and the simulation that calibrates them (``simulate``). It imports nothing of ``posenc.report`` or
``posenc.harness``."""
