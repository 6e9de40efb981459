"""The text of ``report.md``: the sinusoid's two variants side by side, and a checkpoint's sides
(its tables, relative biases and relative vectors) with the definitions of what they show."""

import os

from posenc.analysis.write.format import compare_row, figure_list, fmt


def sinusoid_markdown(report: dict) -> str:
    v, d, n = report["variant"], report["dim"], report["max_len"]
    V = report["variants"]
    names = list(V)
    b = report.get("base", 10000.0)
    lines = [f"# Sinusoidal position encoding, d={d}, N={n}, base {b:g}", "",
             f"Rows PE(0)..PE({n - 1}); chosen variant `{v}` (its values are the top-level keys of report.json).", "",
             "| | " + " | ".join(f"`{x}`" for x in names) + " |", "|---|" + "---|" * len(names)]

    def row(label, get):
        lines.append(compare_row(label, get, V, names))

    row("3.1 max abs(PE(p+k) - M(k)PE(p)), float64", lambda r: r["relative"]["max_error_float64"])
    row("3.1 same, float32 table", lambda r: r["relative"]["max_error_float32"])
    row("(p, k) pairs checked", lambda r: r["relative"]["pairs_checked"])
    row("3.1 factorisation A(k)B(p): max error", lambda r: r["relative"]["factorisation"]["max_error"])
    row("3.1 factorisation: sigma3/sigma1 per pair (rank 2)",
        lambda r: r["relative"]["factorisation"]["rank2_residual"])
    row("least squares M(k), 2x2 blocks: max diff from closed form",
        lambda r: max(f["block"]["max_abs_diff_from_closed_form"] for f in r["relative"]["lstsq"]))
    row("least squares M(k), full DxD: max diff from closed form",
        lambda r: max(f["full"]["max_abs_diff_from_closed_form"] for f in r["relative"]["lstsq"]))
    row("table rank (of D) / condition number", lambda r: f"{r['relative']['lstsq'][0]['full']['table_rank']} / "
        f"{fmt(r['relative']['lstsq'][0]['full']['condition_number'])}")
    row("3.2 wavelength min..max",
        lambda r: f"{fmt(r['values']['wavelength_min'])} .. {fmt(r['values']['wavelength_max'])}")
    row("3.3 norm mean (sqrt(d/2) expected)",
        lambda r: f"{fmt(r['scale']['norm_mean'])} ({fmt(r['scale']['norm_expected'])})")
    row("3.3 norm std", lambda r: r["scale"]["norm_std"])
    row("3.3 value range", lambda r: f"{fmt(r['scale']['value_min'])} .. {fmt(r['scale']['value_max'])}")
    row("3.3 PE norm / token norm (transformer init x sqrt(d))",
        lambda r: r["scale"]["init_tokens"]["transformer"]["pe_to_token_norm_ratio"])
    row("3.3 PE norm / token norm (fconv init, unscaled)",
        lambda r: r["scale"]["init_tokens"]["fconv"]["pe_to_token_norm_ratio"])
    _property_rows(row)
    lines += ["", _SINUSOID_DEFINITIONS, "", _DEFINITIONS, "", figure_list(report.get("figures", []))]
    return "\n".join(lines) + "\n"


def _property_rows(row, attention=False):
    row("dot product: translation invariance", lambda r: r["properties"]["translation_invariance"])
    row("dot product: monotonicity (all offsets)", lambda r: r["properties"]["monotonicity"])
    row("dot product: monotonicity (offsets <= 16)", lambda r: r["properties"]["monotonicity_local16"])
    row("dot product: symmetry", lambda r: f"{fmt(r['properties']['symmetry'])} (holds by construction)")
    if attention:
        def att(key):
            return lambda r: r["attention_logit_properties"]["mean_over_heads"][key]

        def per_head(key):
            return lambda r: " / ".join(fmt(h[key], 3) for h in r["attention_logit_properties"]["per_head"])

        row("layer-0 attention logits: heads", lambda r: r["attention_logit_properties"]["heads"])
        for key, label in (("translation_invariance", "translation invariance"), ("monotonicity", "monotonicity"),
                           ("monotonicity_local16", "monotonicity (offsets <= 16)"), ("symmetry", "symmetry")):
            row(f"layer-0 attention logits: {label}, mean over heads", att(key))
            row(f"layer-0 attention logits: {label}, per head", per_head(key))
    row("probe: absolute position MAE (chance)", lambda r: f"{fmt(r['probes']['absolute_position']['mae'])} "
        f"({fmt(r['probes']['absolute_position']['chance_mae'])})")
    row("probe: relative order error, held-out positions (chance 0.5)",
        lambda r: r["probes"]["relative_order"]["error"])
    row("probe: relative order error, random pair split (misleading)",
        lambda r: r["probes"]["relative_order"]["random_pair_split_error"])


_SINUSOID_DEFINITIONS = """Definitions. M(k): one 2x2 rotation by k*w per sin/cos pair. Factorisation: PE(p+k) - PE(p) =
(M(k) - I) PE(p), a k-only matrix times a p-only vector; the rank-2 column is sigma3/sigma1 of each
pair's (offset x position) difference matrix. Least squares: M(k) fitted from the table alone, as
one 2x2 block per pair and as a free DxD matrix (unique only if the table has full rank D)."""

_DEFINITIONS = """Properties of Wang et al. (ICLR 2021), each for a named proximity phi(x, y) (x: query position, y: key
position), 1 when it holds: translation invariance = share of the variance of phi over x != y
explained by the signed offset y - x; monotonicity = mean over anchors of -Spearman(offset, phi),
forward and backward; symmetry = correlation of phi(x, y) with phi(y, x). For the dot product
phi(x, y) = <PE_x, PE_y> symmetry holds by construction (it is reported, not a finding). Probes
(Wang & Chen, EMNLP 2020): k-fold (default 5) over held-out positions; ridge regression to p (MAE
in positions; chance = predicting the training mean) and logistic regression on [PE(i); PE(j)]
for i < j."""

_ATTENTION_DEFINITIONS = """\
Attention logits: phi_h(x, y) = s (PE_x W_Q^h) . (PE_y W_K^h), the position-position term of head h
of the side's first self-attention layer before the softmax (s = head_dim^-1/2, fairseq's query
scaling; biases left out, as they add terms of one position only). W_Q^h != W_K^h makes it
asymmetric in general: here symmetry is a real question (-1 = antisymmetric)."""


def _vectors_markdown(side: str, v: dict) -> list:
    """A side's relative key and value vectors: per layer, their norms at distance 0 and at the
    clipping distance each way, and how far neighbouring distances' vectors are apart."""
    k = v["settings"]["max_distance"]
    lines = [f"### {side}: {v['kind']}", "",
             f"Learned vectors added to the keys (a^K) and values (a^V) of each self-attention layer for the "
             f"distance key - query clipped to -{k}..{k} ({v['settings']['layers']} layers, head width "
             f"{v['settings']['head_dim']}, shared by the heads). *step*: the mean norm of the difference between "
             "the vectors of neighbouring distances over the mean vector norm (0: distance makes no difference).", "",
             f"| layer | table | norm at -{k} | norm at 0 | norm at +{k} | cosine(-1, 0) | cosine(+1, 0) | step |",
             "|---|---|---|---|---|---|---|---|"]
    for table in ("keys", "values"):
        p = v[table]
        for layer, norms in enumerate(p["norm"]):
            cos = p["cosine_with_distance_0"][layer]
            lines.append(f"| {layer} | {'a^K' if table == 'keys' else 'a^V'} | {fmt(norms[0])} | {fmt(norms[k])} | "
                         f"{fmt(norms[-1])} | {fmt(cos[k - 1])} | {fmt(cos[k + 1])} | "
                         f"{fmt(p['neighbour_step_over_norm'][layer])} |")
    if v.get("notes"):
        lines += ["", "Notes: " + "; ".join(v["notes"]) + "."]
    return lines


def _bias_markdown(side: str, b: dict) -> list:
    """A side's relative bias: what it is, then one row per head."""
    kind = b["kind"]
    if b["learned"]:
        w = b.get("weight", {})
        what = (f"learned T5 bias `{b['source']}` ({b['settings']['num_buckets']} buckets x {b['heads']} heads, "
                f"max_distance {b['settings']['max_distance']}); weight std {fmt(w.get('std'))} against its "
                f"initial std {fmt(w.get('init_std'))} (ratio {fmt(w.get('std_over_init'))})")
    else:
        what = ("ALiBi, fixed: no learned parameters, bias = -slope_h * |distance|, slopes "
                + ", ".join(fmt(x) for x in b["slopes"]))
    far, forward = b["far"], not b["causal"]
    lines = [f"### {side}: {kind}", "",
             f"{what}. {'Causal' if b['causal'] else 'Bidirectional'}: distances d = key - query over "
             f"{b['distance_range']}. Heads: "
             + ", ".join(f"{n} {k}" for k, n in b["locality_counts"].items() if n) + ".",
             ""]
    # (header, per-head key, shown): ALiBi's slopes; keys after the query only where the side has them
    columns = [("head", "head", True), ("slope", "slope", not b["learned"]), ("b(0)", "at_0", True),
               ("b(-1)", "at_minus_1", True), ("b(+1)", "at_plus_1", forward), (f"b(-{far})", "at_far_back", True),
               (f"b(+{far})", "at_far_forward", forward), ("peak at", "peak_distance", True)]
    columns = [(header, key) for header, key, shown in columns if shown]
    headers = [header for header, _ in columns] + ["falls with |d|", "locality"]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for h in b["per_head"]:
        falls = " / ".join(f"{name}: {'yes' if h[key] else 'no'}" for name, key in (("back", "falls_back"),
                           ("forward", "falls_forward")) if h[key] is not None)
        lines.append("| " + " | ".join([fmt(h[key]) for _, key in columns] + [falls, h["locality"]]) + " |")
    if b.get("notes"):
        lines += ["", "Notes: " + "; ".join(b["notes"]) + "."]
    return lines


_BIAS_DEFINITIONS = """Relative attention biases: b_h(d) is what head h adds to a self-attention logit for a key at
distance d = key - query, the same in every layer of the side, computed with the plugin's own
modules from the checkpoint. *Peak at*: the distance with the largest bias. *Falls with |d|*: the
bias never rises from d = 0 to the far end, backward (keys before the query) and forward;
*local* heads fall in every direction, *anti-local* ones never fall, *mixed* ones do both."""


def checkpoint_markdown(report: dict) -> str:
    T = report["tables"]
    names = list(T)
    has_table = any("positions" in t for t in T.values())
    biases = {side: t["relative_bias"] for side, t in T.items() if "relative_bias" in t}
    lines = [f"# Positions in `{os.path.basename(report['checkpoint'])}`", "",
             f"Architecture `{report['arch'] or 'unknown'}` (family {report['family']}); "
             + ", ".join(f"{side}: {t['kind']}" for side, t in T.items()) + "."
             + (f" {report['positions']}." if has_table else ""), ""]
    if biases:
        for side, b in biases.items():
            lines += _bias_markdown(side, b) + [""]
        lines += [_BIAS_DEFINITIONS, ""]
    for side, t in T.items():
        if "relative_vectors" in t:
            lines += _vectors_markdown(side, t["relative_vectors"]) + [""]
    if has_table:
        lines += ["## Position tables", ""]
        lines += _table_markdown(report, names)
    else:
        notes = [f"- {s}: {n}" for s, r in T.items() for n in r.get("notes", [])]
        if notes:
            lines += ["Notes:"] + notes
    lines += ["", figure_list(report.get("figures", []))]
    return "\n".join(lines) + "\n"


def _table_markdown(report: dict, names: list) -> list:
    T = report["tables"]
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]

    def row(label, get):
        lines.append(compare_row(label, get, T, names))

    row("kind", lambda r: r["kind"])
    row("source", lambda r: r["source"])
    row("positions analysed", lambda r: r["positions"])
    row("dimension", lambda r: r["dim"])
    row("norm mean / std", lambda r: f"{fmt(r['scale']['norm_mean'])} / {fmt(r['scale']['norm_std'])}")
    row("value range", lambda r: f"{fmt(r['scale']['value_min'])} .. {fmt(r['scale']['value_max'])}")
    row("trained token norm (as added)", lambda r: r["scale"]["trained_tokens"]["token_norm_mean"])
    row("PE norm / trained token norm", lambda r: r["scale"]["trained_tokens"]["pe_to_token_norm_ratio"])
    row("positions training reached", lambda r: r["trained_positions"])
    row("sinusoid variant / base / scale", lambda r: f"{r['settings']['variant']} / {fmt(r['settings']['base'])} / "
        f"{fmt(r['settings']['scale'])}")
    row("dominant period median", lambda r: r["dominant_period"]["median"])
    _property_rows(row, attention=any("attention_logit_properties" in t for t in T.values()))
    if "comparison" in report:
        c = report["comparison"]
        lines += ["", f"Encoder vs decoder over {c['positions_compared']} positions: mean cosine of the two rows of a "
                  f"position {fmt(c['rowwise_cosine_mean'])}; correlation of their cosine-similarity matrices "
                  f"{fmt(c['cosine_structure_correlation'])}."]
    notes = [f"- {s}: {n}" for s, r in T.items() for n in r.get("notes", [])]
    if notes:
        lines += ["", "Notes:"] + notes
    lines += ["", "Rows of a learned table beyond the longest training sentence never receive a gradient and keep "
              "their random initialisation; use `--max-len` to analyse only the positions training reached.",
              "", _DEFINITIONS]
    if any("attention_logit_properties" in t for t in T.values()):
        lines += ["", _ATTENTION_DEFINITIONS]
    return lines


__all__ = ["checkpoint_markdown", "sinusoid_markdown"]
