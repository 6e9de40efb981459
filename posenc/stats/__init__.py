"""The statistics room, below both the report and the harness: the verdict's test (``verdict``),
power and the seeds to book (``power``), the group sequential design (``sequential``: thresholds
by error spending, conditional power, graphical Holm), the seeds strategy's old stopping rule,
kept to compare against (``old_seeds_rule``), and the simulation that calibrates them
(``simulate``). It imports nothing of ``posenc.report`` or ``posenc.harness``."""
