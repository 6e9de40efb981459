#!/usr/bin/env python
"""What a paper-scale Table 4 costs in cells and GPU hours under each way of choosing seeds: the
group sequential design (``hydra/sweeper=posenc_seeds``), the rule it replaced (issue 24's
re-planning with a floor of 7), and fixed 3, 5 and 10 seeds. docs/statistics.md's worked example.

Normal theory at given variance components of each row's per-seed difference from the baseline
(default: the Multi30k study's, results/table4_multi30k_cpu.md, scaled to newstest2014's 3,003
sentences): d_s = Δ + c + e_s, c the test set's sampling that every seed shares, e_s the seed's own
effect plus its sentence noise. The sentence parts are taken as known (the verdict measures them
from every sentence); the seeds' spread is what each look estimates. Every look is the verdict's
own test (``verdict.p_values``) and every decision the design's (``sequential.decide``, graphical
Holm over the three rows) or the old rule's (``SeedsRule`` on ``power.booking``).

    .venv/bin/python scripts/cost_table4.py [--sweeps 2000] [--effect 0.5] [--gamma G] [--only sequential]

Other rows, test sets and cells: ``--components 'alibi=0,0.40,0.06;shaw=0.30,0.39,0.09'`` (each
row's three sds at 1,000 sentences, as ``posenc-table --power`` prints them), ``--sentences N`` (the
test set the cost is for), ``--hours LOW,HIGH`` (a cell's cost), ``--max-seeds N``, ``--fixed 3,5,10``
(the fixed seed counts to set beside it: a study finds the one whose power matches the design's),
``--alpha A`` (the family-wise level; a level per row whose thresholds cannot be simulated is refused,
as a new sweep refuses it).
"""

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posenc.harness.sweep.config import SeedsPlanConf  # noqa: E402
from posenc.stats import power as power_mod  # noqa: E402
from posenc.stats.old_seeds_rule import SeedsRule  # noqa: E402
from posenc.stats.sequential import Design, Look, decide  # noqa: E402
from posenc.stats.verdict import ALPHA, holm, p_values  # noqa: E402

STUDY_SENTENCES, PAPER_SENTENCES = 1000, 3003
# sd (BLEU) of the seeds' own part, the per-seed sentence noise and the shared sentence part, at
# 1,000 sentences: the Multi30k study's power section (3 seeds, fconv_small, 2 epochs).
COMPONENTS = {"source": (0.33, 0.31, 0.05), "target": (0.00, 0.34, 0.00), "none": (0.99, 0.40, 0.07)}
GPU_HOURS = (20, 60)   # a paper-schedule cell (docs/clusters.md)


@dataclass(frozen=True)
class Scenario:
    """The rows' variance components (sds at STUDY_SENTENCES) and the test set the cost is for."""
    components: dict
    sentences: int = PAPER_SENTENCES

    def parts(self, name: str):
        """(seed variance, sentence variance, shared variance) of a row's d_s at ``sentences``."""
        seed, sentence, shared = self.components[name]
        scale = STUDY_SENTENCES / self.sentences
        return seed ** 2, sentence ** 2 * scale, shared ** 2 * scale

    def draw(self, rng, sweeps: int, most: int, delta: float):
        """{row: d_s (sweeps, most)}: each row's per-seed differences, its shared draw included."""
        out = {}
        for name in self.components:
            seed, sentence, shared = self.parts(name)
            out[name] = (delta + rng.standard_normal((sweeps, 1)) * math.sqrt(shared)
                         + rng.standard_normal((sweeps, most)) * math.sqrt(seed + sentence))
        return out

    def test(self, d: np.ndarray, name: str, n: int):
        """(Δ, s_d, p, se, df) of the verdict's test over the first n seeds, arrays over sweeps."""
        _, sentence, shared = self.parts(name)
        first = d[:, :n]
        sd = first.std(1, ddof=1)
        p, se, df = p_values(first.mean(1), sd, shared + sentence / n, shared + sentence, n, self.sentences)
        return first.mean(1), sd, p, se, df


def sequential(scenario: Scenario, data, design: Design, effect: float, batch: int = SeedsPlanConf.batch_seeds):
    """Seeds per row and the baseline's, and verdicts, of the design over the sweeps."""
    sweeps = next(iter(data.values())).shape[0]
    seeds = {name: np.zeros(sweeps, dtype=int) for name in data}
    found = {name: np.zeros(sweeps, dtype=bool) for name in data}
    for s in range(sweeps):
        looks, frozen, have = {name: [] for name in data}, {}, 0
        while len(frozen) < len(data) and have < design.max_seeds:
            have = design.pilot_seeds if have == 0 else min(have + batch, design.max_seeds)
            for name, d in data.items():
                if name not in frozen:
                    delta, sd, p, se, df = (float(x[0]) for x in scenario.test(d[s:s + 1], name, have))
                    _, _, shared = scenario.parts(name)
                    looks[name].append(Look(have, delta, se, df, p, sd ** 2, shared, scenario.sentences))
            for name, decision in decide(design, effect, looks, frozen).items():
                if decision.stopped and name not in frozen:
                    frozen[name] = decision
                    seeds[name][s] = have
                    found[name][s] = decision.verdict in ("better", "worse")
    return seeds, found


def old_rule(scenario: Scenario, data, effect: float):
    """Issue 24's rule: re-plan each row from its seeds after every batch, floor 7; the verdict
    (Holm over the rows) at the stop."""
    rule = SeedsRule()
    sweeps = next(iter(data.values())).shape[0]
    seeds = {name: np.zeros(sweeps, dtype=int) for name in data}
    p = {name: np.ones(sweeps) for name in data}
    for name, d in data.items():
        _, sentence, shared = scenario.parts(name)
        for s in range(sweeps):
            have = rule.pilot_seeds
            while True:
                _, sd, pv, _, _ = (float(x[0]) for x in scenario.test(d[s:s + 1], name, have))
                components = power_mod.Components(sd ** 2, sentence, shared, scenario.sentences, have)
                step = rule.next(have, power_mod.booking(effect, components))
                if step.stopped:
                    break
                have = step.seeds
            seeds[name][s], p[name][s] = have, pv
    found = {name: np.zeros(sweeps, dtype=bool) for name in data}
    for s in range(sweeps):
        adjusted = holm({name: p[name][s] for name in data})
        for name in data:
            found[name][s] = adjusted[name] < ALPHA
    return seeds, found


def fixed(scenario: Scenario, data, n: int):
    sweeps = next(iter(data.values())).shape[0]
    p = {name: scenario.test(d, name, n)[2] for name, d in data.items()}
    found = {name: np.zeros(sweeps, dtype=bool) for name in data}
    for s in range(sweeps):
        adjusted = holm({name: p[name][s] for name in data})
        for name in data:
            found[name][s] = adjusted[name] < ALPHA
    return {name: np.full(sweeps, n) for name in data}, found


def design_problem(design: Design, rows: int) -> str:
    """Why the script cannot run ``design`` over ``rows`` rows sharing a baseline, in one line, or "":
    a bad value (``Design.problem``), or a level α/rows whose thresholds the simulation cannot resolve
    (``Design.unresolved``, what refuses such a design for a new sweep)."""
    problem = design.problem()
    if problem:
        return problem
    problem = design.unresolved(design.alpha / rows)
    if not problem:
        return ""
    return (f"--alpha {design.alpha:g} over {rows} rows sharing a baseline (--max-seeds {design.max_seeds}): "
            f"{problem}; allowed: --alpha >= {design.smallest_level() * rows:.4g}, fewer rows or fewer looks")


def components_arg(text: str) -> dict:
    """``'alibi=0,0.40,0.06;shaw=0.30,0.39,0.09'`` -> {row: (seed sd, sentence sd, shared sd)}."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(";"))):
        name, _, values = item.partition("=")
        numbers = values.split(",")
        try:
            out[name] = tuple(float(x) for x in numbers)
        except ValueError:
            out[name] = ()
        if not name or len(out[name]) != 3 or min(out[name]) < 0:
            raise argparse.ArgumentTypeError(f"{item!r}: allowed: ROW=SEED_SD,SENTENCE_SD,SHARED_SD (three sds >= 0)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--effect", type=float, default=0.5, help="the planned effect and the true gap, BLEU")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--gamma", type=float, default=None, help="the sequential design's HSD γ (default Design()'s)")
    parser.add_argument("--only", choices=("sequential",), default=None,
                        help="the sequential design's rows only (the others do not depend on its settings)")
    parser.add_argument("--components", type=components_arg, default=COMPONENTS,
                        help="the rows' sds at 1,000 sentences (default: the Multi30k Table 4 study's)")
    parser.add_argument("--sentences", type=int, default=PAPER_SENTENCES, help="the test set the cost is for")
    parser.add_argument("--hours", default=",".join(map(str, GPU_HOURS)), help="a cell's cost, LOW,HIGH")
    parser.add_argument("--max-seeds", type=int, default=Design.max_seeds)
    parser.add_argument("--alpha", type=float, default=Design.alpha, help="the family-wise level over the rows")
    parser.add_argument("--fixed", default="3,5,10", help="fixed seed counts to compare, N,N,...")
    args = parser.parse_args()
    started = time.perf_counter()
    given = {"gamma": args.gamma} if args.gamma is not None else {}
    design = Design(alpha=args.alpha, max_seeds=args.max_seeds, **given)
    problem = design_problem(design, len(args.components))
    if problem:
        sys.exit(f"cost_table4: {problem}")
    hours = [float(x) for x in args.hours.split(",")]
    fixed_counts = [int(x) for x in args.fixed.split(",")]
    if min(fixed_counts) < 2 or max(fixed_counts) > design.max_seeds:
        sys.exit(f"cost_table4: --fixed {args.fixed}: allowed: seed counts from 2 to --max-seeds ({design.max_seeds})")
    scenario = Scenario(args.components, args.sentences)
    names = list(scenario.components)
    print(f"rows {', '.join(names)} against their baseline; variance components "
          f"{'; '.join(f'{k} {v}' for k, v in scenario.components.items())} (sds at {STUDY_SENTENCES} sentences) "
          f"at {scenario.sentences} sentences; {args.sweeps} sweeps per truth; cost {hours[0]:g}-{hours[-1]:g} a cell")
    print(f"| seeds | truth | cells per sweep (mean) | cost | seeds per row ({' / '.join(names)}) "
          f"| rows found ({' / '.join(names)}) |")
    print("|---|---|---|---|---|---|")
    for truth in (0.0, args.effect):
        rng = np.random.default_rng(args.seed)
        data = scenario.draw(rng, args.sweeps, design.max_seeds, truth)
        label = "group sequential (default)" if args.gamma is None else f"group sequential (γ = {args.gamma:g})"
        designs = [(label, sequential, (design, args.effect))]
        if args.only is None:
            designs += [("issue 24's rule (floor 7, max 10)", old_rule, (args.effect,))]
            designs += [(f"fixed {n}", fixed, (n,)) for n in fixed_counts]
        for label, run, settings in designs:
            seeds, found = run(scenario, data, *settings)
            baseline = np.max(np.stack(list(seeds.values())), 0)
            cells = float(np.mean(baseline + sum(seeds.values())))
            cost = f"{cells * hours[0]:,.1f}-{cells * hours[-1]:,.1f}"
            print(f"| {label} | Δ = {truth:g} | {cells:.1f} | {cost} | "
                  + " / ".join(f"{seeds[n].mean():.1f}" for n in names) + " | "
                  + " / ".join(f"{found[n].mean():.2f}" for n in names) + " |")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
