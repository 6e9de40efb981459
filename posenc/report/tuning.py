"""A tune strategy's part of a table (``hydra/sweeper=posenc_tune``): per row, the values its study
chose, the trials it took and what they cost; and, for ``posenc-table --trials``, every trial.

Read from the strategy's state (``posenc.cells.strategy.TuneState``, in ``Sweep.strategy``) and the
trials' own records (``Sweep.trials``): the trials never score the test split.

A chosen value in the outer ``EDGE`` of its range (on the log scale for a log range) is flagged,
with the advice to widen the space: the study's optimum may lie beyond it.
"""

import math
import re

from posenc.cells.record import FAILED, OK, PRUNED, error_of
from posenc.cells.strategy import TuneState

# A trial's state (Optuna's name, as the tune state keeps it) in the words of a cell's status.
STATE_WORDS = {"COMPLETE": OK, "PRUNED": PRUNED, "FAIL": FAILED, "RUNNING": "unfinished"}
_GPUS = re.compile(r" x(\d+)")
EDGE = 0.05   # a chosen value this close to an end of its range (as a share of the range) is flagged


def is_tuned(sweep) -> bool:
    return isinstance(sweep.strategy, TuneState)


def at_edge(values: dict, space: dict) -> list:
    """``["optim.args.lr=0.0029 is in the top 5% of its range 0.0003..0.003 (log scale)"]``: each
    chosen value of a numeric range in its outer EDGE; categorical choices have no edge."""
    out = []
    for key, text in values.items():
        spec = space.get(key) or {}
        low, high, log = spec.get("low"), spec.get("high"), bool(spec.get("log", False))
        try:
            value = float(text)
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            continue
        if "choices" in spec or not low < high or (log and min(low, value) <= 0):
            continue
        where = (math.log(value / low) / math.log(high / low)) if log else (value - low) / (high - low)
        if where >= 1 - EDGE or where <= EDGE:
            end = "top" if where >= 1 - EDGE else "bottom"
            out.append(f"{key}={text} is in the {end} {EDGE:.0%} of its range {low:g}..{high:g}"
                       + (" (log scale)" if log else ""))
    return out


def edge_advice(state, row) -> str:
    """The flag of a tuned row whose chosen values touch their range's edge, with what to do; "" otherwise."""
    flags = at_edge(row.best.values, state.search_space) if row.best else []
    return ("; ".join(flags) + ": the best value may lie beyond it, widen the search space") if flags else ""


def device_hours(records) -> str:
    """What trials cost: GPU hours (cell wall time x the GPUs it trained on) and CPU hours (wall
    time of the cells that trained on a CPU), e.g. ``0.41 CPU h`` or ``12.3 GPU h``."""
    gpu = cpu = 0.0
    for record in records:
        wall = float(record.cell_wall_s or 0) / 3600
        device = str(record.device or "cpu")
        if device.startswith("cuda"):
            gpu += wall * (sum(int(n) for n in _GPUS.findall(device)) or 1)
        else:
            cpu += wall
    parts = [f"{gpu:.2f} GPU h" if gpu else "", f"{cpu:.2f} CPU h" if cpu or not gpu else ""]
    return " + ".join(p for p in parts if p)


def _records(sweep) -> dict:
    return {cell.name: cell.record for cell in sweep.trials}


def _counts(trials) -> str:
    states = [STATE_WORDS.get(t.state, t.state or "?") for t in trials]
    return ", ".join(f"{states.count(word)} {word}" for word in dict.fromkeys(states)) or "none yet"


def tuned_values(sweep, cells) -> str:
    """The values a tuned row's study chose (``optim.args.lr=0.0012``), from its cells' names;
    "" for a row of any other sweep."""
    if not is_tuned(sweep):
        return ""
    names = {cell.name for cell in cells}
    for row in sweep.strategy.rows:
        if row.best and names & {c.dirname for c in sweep.strategy.cells
                                 if c.overrides[:len(row.overrides)] == row.overrides}:
            return " ".join(f"{k}={v}" for k, v in row.best.values.items())
    return ""


def tune_table(report):
    """The tuned rows: the values each row's study chose (flagged at the edge of their range), its
    trials and their cost."""
    state = report.sweep.strategy
    records = _records(report.sweep)
    headers = ["row", "chosen values", "best trial (valid loss)", "trials", "trials' cost", "seeds of the best"]
    body = []
    for row in state.rows:
        best = row.best
        chosen = " ".join(f"{k}={v}" for k, v in best.values.items()) if best else "-"
        if edge_advice(state, row):
            chosen += " (at the edge of its range: widen it)"
        best_text = f"{best.number} ({best.value:.3f})" if best else "no trial finished"
        cost = device_hours([records[t.dirname] for t in row.trials if t.dirname in records])
        seeds = str(len(row.seeds))
        if row.plan is not None:  # sized by the seeds strategy: why it stopped
            seeds += f" ({row.plan.why or 'going on'})"
        body.append([row.row, chosen, best_text, f"{len(row.trials)}: {_counts(row.trials)}", cost, seeds])
    return headers, body


def tune_notes(report) -> list:
    state = report.sweep.strategy
    s = state.settings
    pruner = f"the {s.pruner} pruner on each epoch's validation loss" if s.pruner else "no pruning"
    notes = [f"Tuned rows (hydra/sweeper=posenc_tune): every row of this table was tuned by its own Optuna study "
             f"(TPE, {s.startup_trials} random trials first, sampler seed {s.sampler_seed}; {pruner}) "
             f"over {', '.join(state.search_space)}: {s.trials} trials a row, each trained with seed "
             f"{s.trial_seed} and judged by its validation loss, never by the test split; the scores above are "
             f"the chosen values' "
             + (planned_seeds(s) if s.seeds_strategy else f"own seeds (1-{s.seeds}), ")
             + "which no trial trained with. "
             + "Trials' cost: cell wall time (GPU hours count each GPU). posenc-table --trials lists every trial."]
    edges = [f"{row.row}: {edge_advice(state, row)}" for row in state.rows if edge_advice(state, row)]
    if edges:
        notes.append(f"At the edge of the search space (the outer {EDGE:.0%} of a range, on the log scale for a log "
                     "range): " + "; ".join(edges) + ".")
    return notes


def planned_seeds(settings) -> str:
    """The best values' seeds as the seeds strategy sized them (``TuneSettings.seeds_strategy``)."""
    plan = settings.seeds_strategy
    design = getattr(plan, "design", plan)   # an old rule's settings keep pilot and max_seeds themselves
    return (f"own seeds, sized by the seeds strategy (|Δ| = {plan.effect} BLEU against "
            f"{settings.baseline}, {design.pilot_seeds} pilot seeds, then a look after every batch of "
            f"{plan.batch_seeds} up to max_seeds = {design.max_seeds}; the sequential rows' table "
            "says where each stopped), ")


def trials_table(sweep):
    """Every trial of a tune strategy's sweep: its row, number, values, outcome and cost."""
    records = _records(sweep)
    headers = ["row", "trial", "values", "outcome", "valid loss", "epochs", "wall s", "why"]
    body = []
    for row in sweep.strategy.rows:
        for trial in row.trials:
            record = records.get(trial.dirname)
            loss, epochs, wall = (record.valid_loss, record.epochs, record.cell_wall_s) if record else (None,) * 3
            word = STATE_WORDS.get(trial.state, trial.state or "?")
            said = error_of(record) if record else None
            why = "" if word == OK else (said or "no record yet").split(" (log: ")[0]
            body.append([row.row, str(trial.number), " ".join(f"{k}={v}" for k, v in trial.values.items()),
                         word, "-" if loss is None else f"{loss:.3f}", str(epochs or "-"), str(wall or "-"), why])
    return headers, body
