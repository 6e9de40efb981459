"""The seeds strategy's old rule, kept to compare against: how many seeds a row ran next, from its
plan alone. No sweeper runs it any more: the seeds strategy decides by its group sequential design
(``posenc.stats.sequential``), whose ``Design`` checks the settings the two share. The calibration
(``scripts/calibrate_significance.py``, ``adaptive`` and the old-rule columns beside the design) and
the cost at the paper's scale (``scripts/cost_table4.py``) run this rule to read the design against
it (results/significance_calibration.md, results/cost_table4_paper_scale.md).

An internal pilot (Wittes & Brittain 1990; Kieser & Friede 2003 for the t-test): every row first
runs ``pilot_seeds``; then, after each batch, the row's comparison with its baseline is planned
again from the variance of the seeds it has (``posenc.stats.power.booking``, the number to book),
and the row gets up to ``batch_seeds`` more, until it has its plan or ``max_seeds``; no row stops
before ``min_seeds`` (or max_seeds where that is smaller), whatever its plan says, "no plan"
included. The observed difference is never looked at, so the stop cannot chase a finding; it still
selects on the seeds' spread (a row whose seeds agree by chance stops early, with a small s_d²),
and the floor is what keeps that selection from costing level: the earlier the stop, the fewer the
df of the s_d² it selected on, and the larger the inflation.

Calibrated by simulation, adaptive stop included (scripts/calibrate_significance.py --only
adaptive, results/significance_calibration.md, issue 24), with a 3-seed pilot, batches of 2 and
min_seeds 7, in 7 worlds (the seeds' part 0, 1 and 4 times the sentence part; planned at the
pilot's 500 sentences and, extrapolating, at 1,500; one where max_seeds 6 binds), 800 sweeps per
Δ and world: false-positive rate 0.040-0.061 at α = 0.05 (0.061 in one world, one sweep in 800 above
0.06 and within Monte Carlo noise of 0.05; 0.044-0.057 over 3,000 sweeps), delivered power
0.799-0.955 at the planned effect, 1.0-2.4 times the seeds of the fixed design of the same power. Without
the floor the false-positive rate reached 0.085 where the plan extrapolates; a floor of 5 still
gave 0.063 (3000 sweeps) there. A row whose pilot says "no plan" used to stop at the pilot (power
0.765 in the world where that happens in a quarter of the sweeps); it now goes on to the floor and
is planned again there. Booking only at the pilot, plug-in plans at later looks and never shrinking
the plan were tried before and missed both targets.

The adaptive sweeper (``hydra/sweeper=posenc_seeds``) decided with ``SeedsRule.next`` until the
sequential design replaced it; the calibration's simulation (``posenc.stats.simulate.adaptive``)
still does.
"""

from dataclasses import dataclass

PLAN = "plan"            # the row has the seeds its plan books
MAX = "max_seeds"        # the plan wants more than max_seeds
NO_PLAN = "no plan"      # no number of seeds reaches the power at this test size (or beyond MAX_SEEDS)


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
    min_seeds: int = 7     # no row stops before this many (or max_seeds where smaller): the level's floor

    @property
    def floor(self) -> int:
        """The fewest seeds a row stops with, plan or no plan."""
        return max(self.pilot_seeds, min(self.min_seeds, self.max_seeds))

    def next(self, have: int, planned, shown: str = "") -> Step:
        """The next step of a row with ``have`` finished seeds (paired with its baseline's) whose
        plan books ``planned`` seeds (an int; ``shown``: how the table says it, e.g. ">1000"), or
        None when no number of seeds reaches the power at this test size. Below ``floor`` the row
        goes on whatever the plan says."""
        if have < self.pilot_seeds:
            return Step(self.pilot_seeds, "")
        if have < self.floor:
            return Step(min(have + self.batch_seeds, self.floor), "")
        if planned is None:
            return Step(have, NO_PLAN, "no number of seeds reaches 80% power at this test size")
        target = min(int(planned), self.max_seeds)
        if have >= target:
            if int(planned) > self.max_seeds:
                return Step(have, MAX, f"stopped at max_seeds={self.max_seeds}; the plan books {shown or planned}")
            return Step(have, PLAN, f"its plan books {shown or planned}")
        return Step(min(have + self.batch_seeds, target), "")
