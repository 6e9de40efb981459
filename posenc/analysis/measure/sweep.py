"""``posenc-pe sweep``: the position tables of every cell of a sweep, measured the same way, one
row per cell beside its BLEU.

Reads records and checkpoints only: the sweep as :mod:`posenc.cells.sweep` reads it (every
``result.json`` below it, and the cells its ``multirun.yaml`` planned) and the checkpoint each cell
kept, ``checkpoints/checkpoint_best.pt`` in its own directory (:mod:`posenc.cells.layout`). No
other file is unpickled. Cells that failed, kept no checkpoint, or never reported are rows too,
with their status, never dropped.
"""

from pathlib import Path
from statistics import fmean

from posenc.cells.layout import BEST, CHECKPOINTS, best_checkpoint
from posenc.cells.record import OK, Record, error_of
from posenc.cells.sweep import MISSING, UNREADABLE, Cell, read_sweep
from posenc.kinds import EMBEDDINGS, TABLE, find_kind

CHECKPOINT = Path(CHECKPOINTS) / BEST
SIDES = ("encoder", "decoder")
SIDE_PREFIX = {"encoder": "enc", "decoder": "dec"}

# (column suffix, how to read it from a side's checkpoint report)
SIDE_COLUMNS = (
    ("kind", lambda s: s.get("kind")),
    ("positions", lambda s: s.get("positions")),
    ("norm_mean", lambda s: s["scale"]["norm_mean"]),
    ("pe_to_token_norm", lambda s: s["scale"]["trained_tokens"]["pe_to_token_norm_ratio"]),
    ("dot_translation_invariance", lambda s: s["properties"]["translation_invariance"]),
    ("dot_monotonicity", lambda s: s["properties"]["monotonicity"]),
    ("dot_monotonicity_local16", lambda s: s["properties"]["monotonicity_local16"]),
    ("abs_position_mae", lambda s: s["probes"]["absolute_position"]["mae"]),
    ("abs_position_chance_mae", lambda s: s["probes"]["absolute_position"]["chance_mae"]),
    ("relative_order_error", lambda s: s["probes"]["relative_order"]["error"]),
    ("attn_translation_invariance",
     lambda s: s["attention_logit_properties"]["mean_over_heads"]["translation_invariance"]),
    ("attn_monotonicity_local16", lambda s: s["attention_logit_properties"]["mean_over_heads"]["monotonicity_local16"]),
    ("attn_symmetry", lambda s: s["attention_logit_properties"]["mean_over_heads"]["symmetry"]),
    # a relative attention bias (t5, alibi) instead of a table
    ("bias_heads", lambda s: s["relative_bias"]["heads"]),
    ("bias_local_heads", lambda s: s["relative_bias"]["locality_counts"]["local"]),
    ("bias_at_0_mean", lambda s: fmean(h["at_0"] for h in s["relative_bias"]["per_head"])),
    ("bias_at_far_back_mean", lambda s: fmean(h["at_far_back"] for h in s["relative_bias"]["per_head"])),
    ("bias_far", lambda s: s["relative_bias"]["far"]),
    ("bias_summary", lambda s: _short_summary(s["relative_bias"])),
)
CELL_COLUMNS = ("cell", "placement", "pe", "seed", "status", "bleu", "valid_ppl", "measured", "note")


WHY = {MISSING: "planned in multirun.yaml, no result.json",
       UNREADABLE: "its result.json could not be read as a record"}



def _reads_a_table(kind: str) -> bool:
    """A learned table (or the table of a kind this process does not know): the init yardstick applies."""
    registered = find_kind(kind)
    return registered is None or registered.checkpoint.reads == TABLE


def _silent(kind: str) -> bool:
    """A kind with nothing to read that acts on the embeddings (``none``): no note to give."""
    registered = find_kind(kind)
    return registered is not None and registered.acts == EMBEDDINGS and registered.checkpoint.reads is None

def find_cells(sweep_dir: Path):
    """``(cells, notes)``: every cell of the sweep (``posenc.cells.sweep.Cell``: those that
    reported and those planned that did not), in directory order; ``notes`` says when the plan
    could not be read (then only the cells that reported are known). SweepError when there is no
    sweep."""
    sweep = read_sweep(sweep_dir).require_cells()
    return sweep.every_cell(), [sweep.plan_note] if sweep.plan_note else []


def measure_cell(cell: Cell, *, max_len=None, run_probes=True, folds=5, seed=0):
    """``(row, report, extras)`` of one cell; ``report`` and ``extras`` are None when nothing
    could be measured (the row's ``note`` says why)."""
    from posenc.analysis.measure.checkpoint import checkpoint_report
    from posenc.analysis.read.fairseq_checkpoint import CheckpointError

    record = cell.record or Record()  # a missing or unreadable cell: every field empty
    row = {"cell": cell.name, "placement": record.placement, "pe": record.pe,
           "seed": record.seed, "status": cell.status, "bleu": record.bleu,
           "valid_ppl": record.valid_ppl, "measured": False}
    notes = [WHY[cell.status]] if cell.status in WHY else []
    if cell.status not in (OK, MISSING, UNREADABLE):
        notes.append(f"cell {cell.status}" + (f": {error_of(record)}" if error_of(record) else ""))
    report = extras = None
    checkpoint = best_checkpoint(cell.dir)
    if cell.status == MISSING:
        pass
    elif not checkpoint.is_file():
        notes.append(f"no {CHECKPOINT} in the cell")
    else:
        try:
            report, extras = checkpoint_report(str(checkpoint), max_len=max_len, run_probes=run_probes, folds=folds,
                                               seed=seed, require_table=False)
            row["measured"] = True
        except CheckpointError as exc:
            notes.append(str(exc))
    for side in SIDES:
        entry = (report or {}).get("tables", {}).get(side, {})
        for suffix, read in SIDE_COLUMNS:
            row[f"{SIDE_PREFIX[side]}_{suffix}"] = _safe(read, entry)
        measured = "positions" in entry or "relative_bias" in entry or "relative_vectors" in entry
        if entry.get("kind") is not None and not measured and not _silent(entry["kind"]):
            notes += [f"{side}: {n}" for n in entry.get("notes", [])]  # why nothing was measured
    row["note"] = "; ".join(notes)
    return row, report, extras


def init_references(rows, reports, *, run_probes=True, folds=5, seed=0, draws=5) -> list:
    """What the same measurements give for tables that learned nothing: for each side and table
    shape in the sweep, freshly initialised tables of that shape (the family's N(0, std): fconv
    0.1, Transformer D^-1/2), the mean over ``draws`` seeded draws. The yardstick for the
    learned tables' numbers."""
    import torch

    from posenc.analysis.measure.table import analyze_table
    from posenc.encodings.defaults import FCONV_INIT_STD

    shapes = {}
    for row in rows:
        report = reports.get(row["cell"])
        for side in SIDES:
            entry = (report or {}).get("tables", {}).get(side, {})
            if entry.get("positions") and _reads_a_table(entry.get("kind")):
                std = FCONV_INIT_STD if report.get("family") == "fconv" else entry["dim"] ** -0.5
                shapes.setdefault((side, entry["positions"], entry["dim"], std), []).append(row["cell"])
    refs = []
    for (side, n, d, std), cells in sorted(shapes.items()):
        measured = []
        for draw in range(draws):
            gen = torch.Generator().manual_seed(seed + draw)
            table = torch.randn(n, d, generator=gen, dtype=torch.float64) * std
            rep, _ = analyze_table(table, run_probes=run_probes, folds=folds, seed=seed)
            measured.append({suffix: _safe(read, {"kind": "learned", **rep}) for suffix, read in SIDE_COLUMNS})
        mean = {k: (sum(m[k] for m in measured) / draws
                    if all(isinstance(m[k], (int, float)) for m in measured) else None)
                for k in measured[0]}
        mean.update({"kind": f"N(0, {std:.3g}) init", "positions": n})
        refs.append({"side": side, "positions": n, "dim": d, "std": std, "draws": draws, "cells": len(cells),
                     "values": mean})
    return refs


def _short_summary(bias: dict) -> str:
    from posenc.analysis.measure.bias_locality import short_summary  # torch-free until a cell is measured

    return short_summary(bias)


def _safe(read, entry):
    try:
        return read(entry)
    except (KeyError, TypeError):
        return None


def sweep_rows(sweep_dir: Path, *, max_len=None, run_probes=True, folds=5, seed=0, progress=None):
    """``(rows, reports, extras, notes)`` for every cell of the sweep."""
    rows, reports, extras = [], {}, {}
    cells, notes = find_cells(sweep_dir)
    for cell in cells:
        if progress:
            progress(cell.name)
        row, report, ex = measure_cell(cell, max_len=max_len, run_probes=run_probes, folds=folds, seed=seed)
        rows.append(row)
        if report is not None:
            reports[cell.name] = report
            extras[cell.name] = ex
    return rows, reports, extras, notes


def columns() -> list:
    return list(CELL_COLUMNS[:-1]) + [f"{SIDE_PREFIX[s]}_{c}" for s in SIDES for c, _ in SIDE_COLUMNS] + ["note"]


__all__ = ["CHECKPOINT", "columns", "find_cells", "init_references", "measure_cell",
           "sweep_rows"]
