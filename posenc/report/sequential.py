"""A seeds strategy's part of a table (``hydra/sweeper=posenc_seeds``): for each adaptive row, the
look it stopped at and why, its frozen verdict and the repeated 95% CI at that look (Δ ± the
boundary's t·se), never the fixed-seed CI, and never its p against 0.05.

Read from the strategy's state (``posenc.cells.strategy.SeedsState``, in ``Sweep.strategy``); a
state from the rule before the group sequential design (min_seeds) is shown as that rule ran it.
"""

from posenc.stats.sequential import EFFICACY

OVERSTATES = ("Δ at an efficacy stop overstates |Δ| on average (a row stops early when its Δ happens to be large); "
              "the repeated CI covers the true Δ with 95% at whichever look the row stopped.")


def ci_text(ci) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "-"


def row_stop(row) -> str:
    """One adaptive row in words: ``efficacy at 3 seeds: worse, Δ -25.10, repeated 95% CI [-31.02,
    -19.18] at α 0.0167``; ``going on`` while it runs; the old rule's stop as it said it."""
    if row is None:
        return "going on"
    if not row.looks:  # a sweep of the old rule takes no looks; or none yet
        text = row.why or row.stopped or "going on"
    elif not row.stopped:
        last = row.looks[-1]
        text = f"going on after the look at {last['n']} seeds (p {last['p']:.4f} against a({last['n']}) " \
               f"{last['threshold']:.4f})" if last.get("threshold") is not None else "going on"
    else:
        look = row.looks[-1]
        text = f"{row.why}: {row.verdict}, Δ {look['delta']:+.2f}, repeated 95% CI {ci_text(row.ci)}"
        if row.level is not None:
            text += f" at α {row.level:.4g}"
    return text + warning(row)


def warning(row) -> str:
    """The unreachable warning of a row that has not found its answer ("" once it stopped for efficacy)."""
    return f"; {row.unreachable}" if row.unreachable and row.stopped != EFFICACY else ""


def strategy_table(report):
    """The seeds strategy's rows: the seeds each ran, where and why it stopped, its verdict and the
    repeated CI at that look (new rule); its seeds, last plan and stop (old rule)."""
    state = report.sweep.strategy
    if state.old_rule:
        headers = ["row", "seeds run", "seeds to book (last plan)", "stopped"]
        body = [[r.row + (" (baseline)" if r.baseline else ""), str(len(r.seeds)),
                 "-" if r.planned is None else str(r.planned), r.why or r.stopped or "going on"] for r in state.rows]
        return headers, body
    headers = ["row", "seeds run", "looks", "stopped", "verdict", "Δ at the stop", "repeated 95% CI", "α of its row"]
    body = []
    for r in state.rows:
        if r.baseline:
            body.append([f"{r.row} (baseline)", str(len(r.seeds)), "-", r.why or "runs while any of its rows runs",
                         "-", "-", "-", "-"])
            continue
        look = r.looks[-1] if r.looks else None
        stopped = (r.why or "going on") + warning(r)
        body.append([r.row, str(len(r.seeds)), " ".join(str(x["n"]) for x in r.looks) or "-", stopped,
                     r.verdict or "-", "-" if look is None or not r.stopped else f"{look['delta']:+.2f}",
                     ci_text(r.ci) if r.stopped else "-", "-" if r.level is None else f"{r.level:.4g}"])
    return headers, body


def strategy_notes(report) -> list:
    state = report.sweep.strategy
    s = state.settings
    size = f"{s['test_size']} test sentences" if s.get("test_size") else "this test set"
    if state.old_rule:
        return [old_rule_note(s, size)]
    return [f"Seeds strategy (hydra/sweeper=posenc_seeds), a group sequential design: max_seeds N = "
            f"{s.get('max_seeds')} and the thresholds a(n) fixed before the pilot ({s.get('spending')} spending"
            + (f", γ = {s.get('gamma')}" if s.get("spending") == "hsd" else "")
            + f", α = {s.get('alpha')} over the rows sharing a baseline by graphical Holm); a look after the "
            f"{s.get('pilot_seeds')}-seed pilot and after every batch of {s.get('batch_seeds')}. A row stops for "
            f"efficacy when its p <= a(n) at its α, for futility (from {s.get('futility_from')} seeds) when its "
            f"conditional power at |Δ| = {s.get('effect')} BLEU ({size}), projected to N, falls below "
            f"{s.get('futility')}, or at N; its verdict is then frozen. A baseline row runs while any of its rows "
            "runs. For these rows the verdict, * and Δ 95% CI above are the stop's (the repeated CI), and their "
            "p seeds is never compared with 0.05. " + OVERSTATES]


def old_rule_note(s: dict, size: str) -> str:
    floor = s.get("min_seeds")
    return (f"Seeds strategy (hydra/sweeper=posenc_seeds), the rule before the group sequential design: every row "
            f"ran {s.get('pilot_seeds')} pilot seeds, then batches of up to {s.get('batch_seeds')} more, planned after "
            f"each batch for |Δ| = {s.get('effect')} BLEU at {size} against {s.get('baseline')} from the variance of "
            f"the seeds it had (never the observed Δ), until its plan or max_seeds = {s.get('max_seeds')}"
            + (f", and at least min_seeds = {floor}" if floor is not None else "")
            + ". A baseline row runs the seeds of the rows compared with it. "
            + ("Calibrated by simulation, adaptive stop included (results/significance_calibration.md): with a "
               "3-seed pilot, batches of 2 and min_seeds 7, a false-positive rate of 0.044-0.057 at α = 0.05 and a "
               "delivered power of 0.80-0.96 at the planned effect over 3,000 simulated sweeps in each of 7 settings; "
               "other settings were not calibrated." if floor is not None else
               "This sweep ran before min_seeds, whose rows could stop at the pilot: that procedure does not hold "
               "the verdict's level in every setting (results/significance_calibration.md): read a better or worse "
               "of this table as a lead, and confirm it with a fixed-seed sweep of the seeds it ran."))


def apply_decisions(rows, sweep, primary: str = "bleu") -> None:
    """The adaptive rows' decisions in the table's BLEU verdict columns: the frozen verdict and the
    repeated CI in place of the fixed one; no Holm p (it is never compared with 0.05). A row still
    between looks has no verdict yet. A seeds strategy's rows, or a tune strategy's best values'
    seeds where its seeds strategy decided them."""
    adaptive = sweep.strategy.sequential_rows() if sweep.strategy else []
    if not adaptive:
        return
    rows_of = {}
    for cell in sweep.strategy.cells:
        overrides = [o for o in cell.overrides if o.split("=", 1)[0] != "seed"]
        rows_of[cell.dirname] = next((r for r in adaptive if r.overrides == overrides), None)
    for row in rows:
        mine = {id(rows_of.get(c.name)): rows_of.get(c.name) for c in row.cells}
        state = next(iter(mine.values())) if len(mine) == 1 else None
        if state is None or state.baseline:
            continue
        v = row.values
        v["verdict_bleu"] = state.verdict if state.stopped else "n/a: between looks (no verdict before its stop)"
        if primary == "bleu":
            v["verdict"] = v["verdict_bleu"]
        v["p_seeds_holm"] = None
        v["delta_ci_low"], v["delta_ci_high"] = state.ci if state.stopped and state.ci else (None, None)
        v["sequential"] = row_stop(state)
