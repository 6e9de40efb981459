"""The measurements of a fairseq checkpoint: each side's position table measured as any table, its
relative attention bias or relative key/value vectors summarised, and encoder and decoder compared,
as ``(report, extras)``."""

from posenc.analysis.measure.bias_locality import bias_summary
from posenc.analysis.measure.scale import token_norms
from posenc.analysis.measure.table import analyze_table, compare_tables
from posenc.analysis.measure.vector_profile import vectors_summary
from posenc.analysis.read.fairseq_checkpoint import checkpoint_family, load_checkpoint, model_args
from posenc.analysis.read.model_weights import first_layer_attention, token_embedding
from posenc.analysis.read.position_tables import extract_tables, nothing_to_analyse
from posenc.analysis.read.relative_bias import extract_rebuilt
from posenc.kinds import BIAS, VECTORS

# what the kind's registration rebuilds (posenc.kinds.REBUILT): the report key it goes under, and its summary
REBUILT_SUMMARIES = {BIAS: ("relative_bias", bias_summary), VECTORS: ("relative_vectors", vectors_summary)}


def checkpoint_report(path: str, *, padding_idx=None, max_len=None, run_probes: bool = True, folds: int = 5,
                      seed: int = 0, require_table: bool = True):
    """Extract the encoder and decoder position tables of a fairseq checkpoint and run the table
    measurements on each; compare them when both exist with the same width. A side with a
    relative attention bias (t5, alibi) gets its bias per head and distance under
    ``relative_bias`` instead, one with relative key and value vectors (shaw) those per layer and
    distance under ``relative_vectors``. ``require_table``: a CheckpointError when no side has either."""
    ckpt = load_checkpoint(path)
    tables = extract_tables(ckpt, padding_idx=padding_idx, max_len=max_len, require_table=False)
    rebuilt, why = extract_rebuilt(ckpt, {side: pt.kind for side, pt in tables.items()}, max_len=max_len)
    if require_table and not rebuilt and all(pt.table is None for pt in tables.values()):
        raise nothing_to_analyse(tables, why)
    args = model_args(ckpt)
    sides, extras = {}, {}
    for side, pt in tables.items():
        entry = {"kind": pt.kind, "source": pt.source, "notes": pt.notes + ([why[side]] if side in why else [])}
        if side in rebuilt:  # what the kind's registration rebuilds, under the key of what it is
            reads, result = rebuilt[side]
            entry["source"] = result.source
            key, summary = REBUILT_SUMMARIES[reads]
            entry[key] = summary(result)
        if pt.table is not None:
            extras[side] = _measure_table(ckpt, side, pt, entry, run_probes=run_probes, folds=folds, seed=seed)
        sides[side] = entry
    report = {
        "tool": "posenc-pe",
        "mode": "checkpoint",
        "checkpoint": str(path),
        "arch": str(args.get("arch", "") or args.get("_name", "")),
        "family": checkpoint_family(args, ckpt["model"]),
        "kinds": {side: e["kind"] for side, e in sides.items()},
        "positions": "row p is position p of a sentence (p = 0: first token), i.e. state-dict row padding_idx + 1 + p",
        "tables": sides,
    }
    if len(extras) == 2 and extras["encoder"]["table"].size(1) == extras["decoder"]["table"].size(1):
        report["comparison"] = compare_tables(extras["encoder"]["table"], extras["decoder"]["table"])
    return report, extras


def _measure_table(ckpt: dict, side: str, pt, entry: dict, *, run_probes: bool, folds: int, seed: int) -> dict:
    """Measure a side's table (with its first attention layer's logits and its trained tokens'
    scale where the widths match) into ``entry``; returns the figures' extras."""
    w_q, w_k, heads, scaling, attn_note = first_layer_attention(ckpt, side)
    attention = (w_q, w_k, heads, scaling) if w_q is not None and w_q.size(1) == pt.table.size(1) else None
    rep, ex = analyze_table(pt.table, run_probes=run_probes, folds=folds, seed=seed, attention=attention)
    if attention is not None:
        rep["attention_logit_properties"]["note"] = attn_note
    else:
        entry["attention_logit_properties_absent"] = attn_note
    entry.update({"padding_idx": pt.padding_idx, "first_row": pt.first_row,
                  "rows_in_checkpoint": pt.rows_in_checkpoint, "trained_positions": pt.trained_positions},
                 **rep)
    if pt.settings:
        entry["settings"] = pt.settings
    tok, scale, note = token_embedding(ckpt, side)
    if tok is not None and tok.size(1) == pt.table.size(1):
        tn = token_norms(tok, scale, padding_idx=pt.padding_idx)
        tn["note"] = note
        tn["pe_to_token_norm_ratio"] = rep["scale"]["norm_mean"] / tn["token_norm_mean"]
        entry["scale"]["trained_tokens"] = tn
    return ex


__all__ = ["checkpoint_report"]
