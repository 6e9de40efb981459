"""The seeds strategy's rule: how many seeds a row runs next, from its plan alone.

An internal pilot (Wittes & Brittain 1990; Kieser & Friede 2003 for the t-test): every row first
runs ``pilot_seeds``; then, after each batch, the row's comparison with its baseline is planned
again from the variance of the seeds it has (``posenc.report.power.booking``, the number to book),
and the row gets up to ``batch_seeds`` more, until it has its plan or ``max_seeds``. The observed
difference is never looked at, so the stop cannot chase a finding; it still selects on the seeds'
spread (a row whose seeds agree by chance stops early, with a small s_d²), which costs some level.

Calibrated by simulation, adaptive stop included (scripts/calibrate_significance.py --only
adaptive, results/significance_calibration.md, issue 24), with a 3-seed pilot and batches of 2:
false-positive rate 0.046-0.085 at α = 0.05 (above 0.06 where the plan extrapolates to 3 times the
pilot's sentences: 0.066 with no seeds' own part, 0.085 with a seeds' part 4 times the sentence
part), delivered power 0.765-0.940 (under 0.78 only where a pilot's shared part often says "no
plan" at the edge of what the test set can show), 1.3-2.1 times the seeds of the fixed design of
the same power. Booking only at the pilot (no re-planning) was tried: it did not recover that
power and used more than twice the seeds, so the plan is made again after every batch.

The harness's adaptive sweeper (``hydra/sweeper=posenc_seeds``) and the calibration's simulation
both decide with ``SeedsRule.next``.
"""

from dataclasses import dataclass

PLAN = "plan"            # the row has the seeds its plan books
MAX = "max_seeds"        # the plan wants more than max_seeds
NO_PLAN = "no plan"      # no number of seeds reaches the power at this test size (or beyond MAX_SEEDS)
# Stops the sweeper sees before the rule (a row's cells, not its plan):
UNTESTABLE = "untestable"      # its pilot finished, but the report cannot compare it with its baseline
CELLS_FAILED = "cells failed"  # not enough of its cells finished to reach the seeds it wants


@dataclass(frozen=True)
class Step:
    seeds: int       # the seeds the row should have once the next batch ran (== have when it stops)
    stopped: str     # "" while the row goes on; else PLAN, MAX or NO_PLAN
    why: str = ""    # the stop in words, for the summary and the table


@dataclass(frozen=True)
class SeedsRule:
    pilot_seeds: int = 3
    max_seeds: int = 10
    batch_seeds: int = 2

    def problem(self) -> str:
        """What is wrong with these values, in one line naming them, or ""."""
        for name in ("pilot_seeds", "max_seeds", "batch_seeds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                return f"{name}={value!r} is not allowed; allowed: a whole number >= 1"
        if self.pilot_seeds < 2:
            return f"pilot_seeds={self.pilot_seeds} is not allowed; allowed: 2 or more (a plan needs the seeds' spread)"
        if self.max_seeds < self.pilot_seeds:
            return (f"max_seeds={self.max_seeds} is less than pilot_seeds={self.pilot_seeds}; "
                    f"allowed: max_seeds >= pilot_seeds")
        return ""

    def next(self, have: int, planned, shown: str = "") -> Step:
        """The next step of a row with ``have`` finished seeds (paired with its baseline's) whose
        plan books ``planned`` seeds (an int; ``shown``: how the table says it, e.g. ">1000"), or
        None when no number of seeds reaches the power at this test size."""
        if have < self.pilot_seeds:
            return Step(self.pilot_seeds, "")
        if planned is None:
            return Step(have, NO_PLAN, "no number of seeds reaches 80% power at this test size")
        target = min(int(planned), self.max_seeds)
        if have >= target:
            if int(planned) > self.max_seeds:
                return Step(have, MAX, f"stopped at max_seeds={self.max_seeds}; the plan books {shown or planned}")
            return Step(have, PLAN, f"its plan books {shown or planned}")
        return Step(min(have + self.batch_seeds, target), "")
