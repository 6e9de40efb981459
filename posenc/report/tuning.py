"""A tune strategy's part of a table (``hydra/sweeper=posenc_tune``): per row, the values its study
chose, the trials it took and what they cost; and, for ``posenc-table --trials``, every trial.

Read from the strategy's state (``posenc.cells.plan.TUNE_FILE``, in ``Sweep.strategy``) and the
trials' own records (``Sweep.trials``): the trials never score the test split.
"""

import re

from posenc.cells.record import FAILED, OK, PRUNED

# A trial's state (Optuna's name, as the tune state keeps it) in the words of a cell's status.
STATE_WORDS = {"COMPLETE": OK, "PRUNED": PRUNED, "FAIL": FAILED, "RUNNING": "unfinished"}
_GPUS = re.compile(r" x(\d+)")


def is_tuned(sweep) -> bool:
    return bool(sweep.strategy) and sweep.strategy.get("strategy") == "tune"


def device_hours(records) -> str:
    """What trials cost: GPU hours (cell wall time x the GPUs it trained on) and CPU hours (wall
    time of the cells that trained on a CPU), e.g. ``0.41 CPU h`` or ``12.3 GPU h``."""
    gpu = cpu = 0.0
    for record in records:
        wall = float(record.get("cell_wall_s") or 0) / 3600
        device = str(record.get("device") or "cpu")
        if device.startswith("cuda"):
            gpu += wall * (sum(int(n) for n in _GPUS.findall(device)) or 1)
        else:
            cpu += wall
    parts = [f"{gpu:.2f} GPU h" if gpu else "", f"{cpu:.2f} CPU h" if cpu or not gpu else ""]
    return " + ".join(p for p in parts if p)


def _records(sweep) -> dict:
    return {cell.name: cell.record for cell in sweep.trials}


def _counts(trials) -> str:
    states = [STATE_WORDS.get(t.get("state"), t.get("state") or "?") for t in trials]
    return ", ".join(f"{states.count(word)} {word}" for word in dict.fromkeys(states)) or "none yet"


def tuned_values(sweep, cells) -> str:
    """The values a tuned row's study chose (``optim.args.lr=0.0012``), from its cells' names;
    "" for a row of any other sweep."""
    if not is_tuned(sweep):
        return ""
    names = {cell.name for cell in cells}
    for row in sweep.strategy.get("rows", []):
        if row.get("best") and names & {c["dirname"] for c in sweep.strategy.get("cells", [])
                                        if c["overrides"][:len(row["overrides"])] == row["overrides"]}:
            return " ".join(f"{k}={v}" for k, v in row["best"]["values"].items())
    return ""


def tune_table(report):
    """The tuned rows: the values each row's study chose, its trials and their cost."""
    sweep = report.sweep
    records = _records(sweep)
    headers = ["row", "chosen values", "best trial (valid loss)", "trials", "trials' cost", "seeds of the best"]
    body = []
    for row in sweep.strategy.get("rows", []):
        trials, best = row.get("trials", []), row.get("best")
        chosen = " ".join(f"{k}={v}" for k, v in best["values"].items()) if best else "-"
        best_text = f"{best['number']} ({best['value']:.3f})" if best else "no trial finished"
        cost = device_hours([records[t["dirname"]] for t in trials if t["dirname"] in records])
        seeds = str(len(row.get("seeds") or []))
        if row.get("plan"):  # sized by the seeds strategy: why it stopped
            seeds += f" ({row['plan'].get('why') or 'going on'})"
        body.append([row["row"], chosen, best_text, f"{len(trials)}: {_counts(trials)}", cost, seeds])
    return headers, body


def tune_notes(report) -> list:
    s = report.sweep.strategy.get("settings", {})
    space = report.sweep.strategy.get("search_space") or {}
    pruner = f"the {s['pruner']} pruner on each epoch's validation loss" if s.get("pruner") else "no pruning"
    return [f"Tuned rows (hydra/sweeper=posenc_tune): every row of this table was tuned by its own Optuna study "
            f"(TPE, {s.get('startup_trials')} random trials first, sampler seed {s.get('sampler_seed')}; {pruner}) "
            f"over {', '.join(space)}: {s.get('trials')} trials a row, each trained with seed {s.get('trial_seed')} "
            f"and judged by its validation loss, never by the test split; the scores above are the chosen values' "
            + (planned_seeds(s) if s.get("seeds_strategy") else f"own seeds (1-{s.get('seeds')}), ")
            + "which no trial trained with. "
            + "Trials' cost: cell wall time (GPU hours "
            "count each GPU). posenc-table --trials lists every trial."]


def planned_seeds(settings: dict) -> str:
    plan = settings["seeds_strategy"]
    return (f"own seeds, sized by the seeds strategy (|Δ| = {plan.get('effect')} BLEU against "
            f"{settings.get('baseline')}, "
            f"{plan.get('pilot_seeds')} pilot seeds, then batches of {plan.get('batch_seeds')} until the plan, at "
            f"least {plan.get('min_seeds')} and at most {plan.get('max_seeds')}; the power section is its last plan), ")


def trials_table(sweep):
    """Every trial of a tune strategy's sweep: its row, number, values, outcome and cost."""
    records = _records(sweep)
    headers = ["row", "trial", "values", "outcome", "valid loss", "epochs", "wall s", "why"]
    body = []
    for row in sweep.strategy.get("rows", []):
        for trial in row.get("trials", []):
            record = records.get(trial["dirname"]) or {}
            loss = record.get("valid_loss")
            word = STATE_WORDS.get(trial.get("state"), trial.get("state") or "?")
            why = "" if word == OK else (record.get("error") or "no record yet").split(" (log: ")[0]
            body.append([row["row"], str(trial["number"]), " ".join(f"{k}={v}" for k, v in trial["values"].items()),
                         word, "-" if loss is None else f"{loss:.3f}", str(record.get("epochs") or "-"),
                         str(record.get("cell_wall_s") or "-"), why])
    return headers, body
