"""A seeds strategy's part of a table (``hydra/sweeper=posenc_seeds``): for each adaptive row, the
look it stopped at and why, its frozen verdict, the Δ of that look with its median-unbiased
estimate (every stop), the repeated CI at that look at α/m (Δ ± the boundary's t·se: the level
fixed before the pilot, whose coverage holds) and its stage-wise ordering p; never the fixed-seed
CI, and never a fixed-sample p (the verdict's or sacreBLEU's sentence-only one).

Read from the strategy's state (``posenc.cells.strategy.SeedsState``, in ``Sweep.strategy``); a
state from the rule before the group sequential design (min_seeds) is shown as that rule ran it.
"""

import math

from posenc.cells.record import is_ok
from posenc.stats.sequential import EFFICACY, FUTILITY, MAX, interval_of, median_unbiased, stagewise_p

OVERSTATES = ("Δ at the stop is biased by the stop: at an early efficacy stop it overstates |Δ| on average (a row "
              "stops early when its Δ happens to be large), at max_seeds it understates it. The median-unbiased Δ "
              "beside it (every stop; a futility stop's with its look taken as the last) lies above the truth half "
              "the time over all the outcomes the design can have, but not given the stop: after an early efficacy "
              "stop it still overstates, after a max_seeds stop it still understates "
              "(results/significance_calibration.md). The repeated CI is at α/m, the row's level before any row "
              "rejected (100(1 - α/m)%, e.g. 98.3% at α/3), which does not depend on the data: it covers that "
              "row's true Δ with at least that probability at whichever look it stopped, whatever the other rows "
              "did. A row that rejected at a level Holm passed on to it (α of its row above α/m) can have an "
              "interval that holds 0; the family's intervals hold together at 1 - α.")


def ci_text(ci) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "-"


def ci_label(level) -> str:
    """What a stopped row's interval is: a repeated CI at its level (not 95%, not the family's)."""
    return "repeated CI" if level is None else f"repeated {100 * (1 - level):.1f}% CI"


def stop_interval(row, state) -> tuple:
    """``(repeated CI, its α)`` of a stopped row: at α/m, the level fixed before the pilot. A state
    before issue 60 kept it at the level passed on (``row.level``), which its coverage does not hold
    at: it is taken again at α/m, m its family's size (``state.family_size``). (None, None) for a
    row going on or stopped by the sweeper (untestable, failed cells)."""
    if not row.stopped or not row.ci:
        return None, None
    if row.ci_level is not None:
        return tuple(row.ci), row.ci_level
    interval = interval_of(state.seeds_settings().design, state.family_size(row))(row.stop_look())
    return interval["ci"], interval["ci_level"]


def inference(state, settings) -> dict:
    """After a sequential stop: the stage-wise ordering p at the row's level (efficacy and
    max_seeds stops; a futility stop, non-binding, has none) and the median-unbiased Δ of every
    stop (a futility stop's with its look taken as the last, as the non-binding thresholds do;
    ``posenc.stats.sequential``); {} for a row still going on."""
    look = state.stop_look() if state.stopped in (EFFICACY, FUTILITY, MAX) else None
    if look is None or state.level is None:
        return {}
    design = settings.design
    out = {"delta_median_unbiased": median_unbiased(design, look, state.level)}
    if state.stopped != FUTILITY:
        out["p_stagewise"] = stagewise_p(design, look.n, look.p, state.level)
    return out


def row_stop(row, settings=None, interval=None) -> str:
    """One adaptive row in words: ``efficacy at 3 seeds: worse, Δ -25.10 (median-unbiased -24.90),
    repeated 98.3% CI [-31.02, -19.18], tested at α 0.025``; ``going on`` while it runs; the old
    rule's stop as it said it. ``interval``: ``stop_interval``'s (default the state's own)."""
    if row is None:
        return "going on"
    if not row.looks:  # a sweep of the old rule takes no looks; or none yet
        text = row.why or row.stopped or "going on"
    elif not row.stopped:
        last = row.looks[-1]
        judged = last.threshold is not None and not math.isnan(last.threshold)
        text = f"going on after the look at {last.n} seeds (p {last.p:.4f} against a({last.n}) " \
               f"{last.threshold:.4f})" if judged else "going on"
    else:
        look = row.stop_look()
        unbiased = inference(row, settings).get("delta_median_unbiased") if settings else None
        ci, level = interval or (row.ci, row.level if row.ci_level is None else row.ci_level)
        text = f"{row.why}: {row.verdict}, Δ {look.delta:+.2f}" + \
            (f" (median-unbiased {unbiased:+.2f})" if unbiased is not None else "") + \
            f", {ci_label(level)} {ci_text(ci)}"
        if row.level is not None:
            text += f", tested at α {row.level:.4g}"
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
    headers = ["row", "seeds run", "looks", "stopped", "verdict", "Δ at the stop", "median-unbiased Δ",
               "repeated CI at α/m", "α it was tested at", "stage-wise p", "overrun: seeds run after its stop"]
    body = []
    for r in state.rows:
        if r.baseline:
            body.append([f"{r.row} (baseline)", str(len(r.seeds)), "-", r.why or "runs while any of its rows runs",
                         "-", "-", "-", "-", "-", "-", "-"])
            continue
        look = r.stop_look() if r.stopped else None
        after = inference(r, state.seeds_settings())
        ci, ci_level = stop_interval(r, state)
        stopped = (r.why or "going on") + warning(r)
        body.append([r.row, str(len(r.seeds)), " ".join(str(x.n) for x in r.looks) or "-", stopped,
                     r.verdict or "-", "-" if look is None else f"{look.delta:+.2f}",
                     number(after.get("delta_median_unbiased"), "+.2f"),
                     f"{ci_text(ci)} ({ci_label(ci_level).split()[1]})" if ci else "-",
                     "-" if r.level is None else f"{r.level:.4g}", number(after.get("p_stagewise"), ".4f"),
                     ", ".join(map(str, overrun(r))) or "-"])
    return headers, body


def overrun(row) -> list:
    """The seeds a stopped row ran after its stopping look (a retest that stopped it at an earlier
    look): in no decision, Δ, interval or column of the row."""
    look = row.stop_look() if row.stopped else None
    if look is None or not look.n:
        return []
    kept = {str(s) for s in stop_seeds(row, row.seeds)}
    return sorted((s for s in row.seeds if str(s) not in kept), key=float)


def number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def strategy_notes(report) -> list:
    state = report.sweep.strategy
    s = state.settings
    size = f"{s.test_size} test sentences" if s.test_size else "this test set"
    if state.old_rule:
        return [old_rule_note(s, size)]
    d = s.design
    statistic = ("the verdict's t, at its least favourable test-set share" if d.statistic == "verdict"
                 else "the seeds-only t, as sweeps started before 2026-12-03 ran them")
    return [f"Seeds strategy (hydra/sweeper=posenc_seeds), a group sequential design: max_seeds N = "
            f"{d.max_seeds} and the thresholds a(n) fixed before the pilot, for {statistic} "
            f"({d.spending} spending"
            + (f", γ = {d.gamma}" if d.spending == "hsd" else "")
            + f", α = {d.alpha} over the rows sharing a baseline by graphical Holm); a look after the "
            f"{d.pilot_seeds}-seed pilot and after every batch of {s.batch_seeds}. A row stops for "
            f"efficacy when its p <= a(n) at its α, for futility (from {d.futility_from} seeds) when its "
            f"conditional power at |Δ| = {s.effect} BLEU ({size}), projected to N, falls below "
            f"{d.futility}, or at N; its verdict is then frozen. A baseline row runs while any of its rows "
            "runs. For these rows the verdict, *, Δ and Δ CI above are the stopping look's (the CI is the repeated CI "
            "at α/m), p seeds (Holm) and p sentences only are empty, and the CSV's p_seeds is the stage-wise "
            "ordering p at the level the row was tested at (Jennison & Turnbull, ch. 8; an efficacy or max_seeds "
            "stop; the largest over the test-set shares the thresholds hold for; at most that α exactly when the "
            "row rejected), never the fixed-sample p of seeds chosen by looks. " + OVERSTATES,
            SAME_SEEDS] + design_note(state) + adopted_note(state) + [
                f"{label}: every column over its stopping look's seeds {', '.join(map(str, kept))}; overrun: seed "
                f"{', '.join(map(str, out))} ran after that look (a retest stopped the row at an earlier one) and is "
                f"in no decision, Δ, interval or column of the row; over every seed it ran Δ is "
                f"{'-' if delta is None else format(delta, '+.2f')} (an estimate outside the design, CSV "
                f"delta_bleu_with_overrun)" for label, kept, out, delta in left_out_rows(report)]


def design_note(state) -> list:
    """The design's hash as the first launch wrote it (a state older than the hash has none)."""
    if not getattr(state, "design", ""):
        return []
    return [f"Design {state.design}: the settings and rows above, fixed at the sweep's first launch "
            "(design_hash in seeds_strategy.json; a rerun with another design or family is refused, and a "
            "state edited since does not read)."]


def adopted_note(state) -> list:
    """The cells a sweep found in its directory and adopted (before its first look, or on a rerun:
    cells its state had not launched), said once."""
    found = list(getattr(state, "adopted", None) or [])
    if not found:
        return []
    return [f"Adopted: {len(found)} cells were in the sweep directory before the design launched them "
            f"(hydra.sweeper.adopt=true): the first look of an open row after they were found took them as they "
            f"were, and a row already stopped lists them as overrun: {', '.join(found)}."]


SAME_SEEDS = ("One row, one set of seeds: a stopped row's every column (BLEU, chrF++, the long split, seeds ok) "
              "is over its stopping look's seeds, those its Δ and interval are over; its p sentences only "
              "(sacreBLEU's fixed-sample test of the concatenated outputs) is empty, as the looks chose the seeds. "
              "Its secondary "
              "columns (chrF++, the long split) are estimates with their fixed-sample 95% interval over those seeds, "
              "not adjusted for the looks, and have no verdict and no p: the looks tested BLEU on the test split "
              "only, and a fixed-sample test on seeds they chose does not hold its level "
              "(results/significance_calibration.md). The baseline row's columns are over all its seeds (it runs "
              "while any of its rows runs): a row's BLEU minus the baseline's need not equal its Δ, which is over "
              "the seeds the two share. Each repeated CI covers its own row's Δ with at least 1 - α/m; the m "
              "intervals of a family hold together with at least 1 - α.")


def left_out_rows(report) -> list:
    """The table's stopped rows that ran seeds beyond their stopping look (``keep_stop_seeds``), each
    as ``(its label, the stopping look's seeds, the overrun seeds, Δ over every seed it ran)``."""
    return [(" ".join(map(str, r.identity.values())), r.sequential.seeds, r.sequential.left_out,
             r.sequential.delta_with_overrun)
            for r in getattr(report, "rows", []) if getattr(r.sequential, "left_out", None)]


def old_rule_note(s, size: str) -> str:
    """The old rule's sweep (``OldRuleSettings``) in words."""
    floor = s.min_seeds
    return (f"Seeds strategy (hydra/sweeper=posenc_seeds), the rule before the group sequential design: every row "
            f"ran {s.pilot_seeds} pilot seeds, then batches of up to {s.batch_seeds} more, planned after "
            f"each batch for |Δ| = {s.effect} BLEU at {size} against {s.baseline} from the variance of "
            f"the seeds it had (never the observed Δ), until its plan or max_seeds = {s.max_seeds}"
            + (f", and at least min_seeds = {floor}" if floor is not None else "")
            + ". A baseline row runs the seeds of the rows compared with it. "
            + ("Calibrated by simulation, adaptive stop included (results/significance_calibration.md): with a "
               "3-seed pilot, batches of 2 and min_seeds 7, a false-positive rate of 0.044-0.057 at α = 0.05 and a "
               "delivered power of 0.80-0.96 at the planned effect over 3,000 simulated sweeps in each of 7 settings; "
               "other settings were not calibrated." if floor is not None else
               "This sweep ran before min_seeds, whose rows could stop at the pilot: that procedure does not hold "
               "the verdict's level in every setting (results/significance_calibration.md): read a better or worse "
               "of this table as a lead, and confirm it with a fixed-seed sweep of the seeds it ran."))


def adaptive_states(rows, sweep) -> dict:
    """``{id(row): its SeedsRow}`` for each table row (``posenc.report.rows.TableRow``) whose seeds a
    sequential design runs: a seeds strategy's rows, or a tune strategy's best values' seeds where its
    seeds strategy runs them; never a baseline row (it runs while its rows run, and decides nothing)."""
    adaptive = sweep.strategy.sequential_rows() if sweep.strategy else []
    if not adaptive:
        return {}
    rows_of = {}
    for cell in sweep.strategy.cells:
        overrides = [o for o in cell.overrides if o.split("=", 1)[0] != "seed"]
        rows_of[cell.dirname] = next((r for r in adaptive if r.overrides == overrides), None)
    out = {}
    for row in rows:
        mine = {id(rows_of.get(c.name)): rows_of.get(c.name) for c in row.cells}
        state = next(iter(mine.values())) if len(mine) == 1 else None
        if state is not None and not state.baseline:
            out[id(row)] = state
    return out


def stopped_rows(rows, sweep) -> dict:
    """``{id(row): its SeedsRow}`` for the rows a sequential design has stopped: their verdicts are
    frozen, so no plan books them more seeds."""
    return {key: state for key, state in adaptive_states(rows, sweep).items() if state.stopped}


def short_stop(state) -> str:
    """An adaptive row in a few words: ``worse: efficacy at 3 seeds``, ``no evidence: futility at 5
    seeds``, ``no evidence: max_seeds at 10 seeds``, ``going on after 3 seeds``."""
    if not state.stopped:
        return f"going on after {state.looks[-1].n} seeds" if state.looks else "going on"
    why = (state.why or state.stopped).split(":")[0]
    if " at " not in why and state.looks:   # max_seeds: where it stopped, as efficacy and futility say
        why += f" at {state.looks[-1].n} seeds"
    return f"{state.verdict or 'n/a'}: {why}"


# The question the looks test: BLEU on the test split (``rows.PRIMARIES``' key). Another primary, or
# another baseline, would give a fixed-sample verdict on seeds these looks chose.
DESIGN_PRIMARY = "bleu"
SECONDARY = "n/a: secondary of a sequential design, estimate only (no verdict)"


def design_question_problem(sweep, primary: str, baseline: tuple) -> str:
    """Why a table of ``sweep`` cannot answer with this primary or baseline, in one line, or "": the
    rows a sequential design decided were decided on BLEU of the test split against its baseline."""
    rows = sweep.strategy.sequential_rows() if getattr(sweep, "strategy", None) else []
    if not rows:
        return ""
    if primary != DESIGN_PRIMARY:
        return (f"--primary {primary}: this sweep's rows were decided by a sequential design on "
                f"{DESIGN_PRIMARY} (BLEU on the test split), whose looks chose their seeds; allowed: "
                f"--primary {DESIGN_PRIMARY}")
    own = str(sweep.strategy.settings.baseline or "")
    key, _, value = own.partition("=")
    if own and tuple(baseline) != (key.lstrip("+"), value):
        return (f"--baseline {'='.join(baseline)}: this sweep's rows were decided by a sequential design "
                f"against {own}; allowed: --baseline {own}, or none")
    return ""


def stop_seeds(state, paired: list) -> list:
    """The seeds of a stopped row's stopping look: as its state recorded them, else (a state written
    before it kept them) the first n of the seeds it shares with its baseline, as the look took them."""
    look = state.stop_look()
    recorded = state.look_seeds[state.looks.index(look)] if look in state.looks and \
        len(state.look_seeds) == len(state.looks) else None
    return list(recorded) if recorded else sorted(paired, key=float)[:look.n]


def keep_stop_seeds(rows, sweep, bases) -> None:
    """One row, one set of seeds: a stopped adaptive row keeps only the cells of its stopping look's
    seeds (its failed cells stay, to be listed), so that its BLEU, chrF++, the long split and the
    seeds column are over the seeds its Δ and interval are over; the seeds it ran beyond them (a
    retest that stopped it at an earlier look: overrun) are named in ``row.sequential.left_out``,
    with Δ over every seed it ran in ``delta_with_overrun``. ``bases``: ``{id(row): its baseline row}``."""
    for row in rows:
        state = adaptive_states([row], sweep).get(id(row))
        if state is None or not state.stopped or state.stop_look() is None:
            continue
        base = bases.get(id(row))
        theirs = base.seed_values("bleu") if base is not None else {}
        mine = row.seed_values("bleu")
        keep = {str(s) for s in stop_seeds(state, [s for s in mine if s in theirs])}
        row.sequential.seeds = sorted((s for s in mine if str(s) in keep), key=float)
        row.sequential.left_out = sorted((s for s in mine if str(s) not in keep), key=float)
        paired = [s for s in mine if s in theirs]
        if row.sequential.left_out and paired:
            row.sequential.delta_with_overrun = sum(mine[s] - theirs[s] for s in paired) / len(paired)
        row.cells = [c for c in row.cells if not is_ok(c.record) or str(c.record.seed) in keep]


def estimates_only(row) -> None:
    """An adaptive row's fixed-sample tests, which its seeds (chosen by looks) do not hold the level
    of: its secondary verdicts become estimates with their 95% interval, and sacreBLEU's
    sentence-only p (every split) is dropped."""
    for key, secondary in row.verdicts.items():
        if key != (DESIGN_PRIMARY, "test") and not str(secondary.verdict or "").startswith("n/a"):
            ci = "" if secondary.delta_ci_low is None else \
                f"; 95% CI [{secondary.delta_ci_low:+.2f}, {secondary.delta_ci_high:+.2f}]"
            secondary.verdict, secondary.p_seeds, secondary.p_seeds_holm = SECONDARY + ci, None, None
    for comparison in row.comparisons.values():
        comparison.p_value = None


def apply_decisions(rows, sweep) -> None:
    """The adaptive rows' decisions in the table's BLEU verdict columns: the frozen verdict and the
    repeated CI at α/m in place of the fixed one; no Holm p (it is never compared with 0.05) and no
    sentence-only p. A row still between looks has no verdict yet. Its secondary columns (chrF++,
    the long split) keep their estimate and fixed-sample 95% interval, and have no verdict and no p.
    A seeds strategy's rows, or a tune strategy's best values' seeds where its seeds strategy
    decided them."""
    states = adaptive_states(rows, sweep)
    for row in rows:
        state = states.get(id(row))
        if state is None:
            continue
        estimates_only(row)
        v = row.verdicts[(DESIGN_PRIMARY, "test")]
        v.verdict = state.verdict if state.stopped else "n/a: between looks (no verdict before its stop)"
        settings = sweep.strategy.seeds_settings()
        after = inference(state, settings)
        look = state.stop_look() if state.stopped else None
        if look is not None:  # the stopping look's Δ, as its CI and its verdict are
            row.comparisons["test"].delta_bleu = look.delta
        v.p_seeds = after.get("p_stagewise")   # never the fixed-sample p: this row's seeds were chosen by looks
        v.p_seeds_holm = None
        row.sequential.delta_median_unbiased = after.get("delta_median_unbiased")
        ci, ci_level = stop_interval(state, sweep.strategy)
        v.delta_ci_low, v.delta_ci_high = ci or (None, None)
        v.delta_ci_level = 1 - ci_level if ci else None   # α/m's, fixed before the pilot
        row.sequential.stop = row_stop(state, settings, (ci, ci_level))
