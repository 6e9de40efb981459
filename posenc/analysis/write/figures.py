"""The PNG figures of each command, drawn by :mod:`posenc.analysis.write.plots`; each function
returns the file names it wrote."""

import math
import os

from posenc.analysis.measure.relative_linear import pair_columns
from posenc.analysis.write import plots

SCATTER_PANELS = (("dot_translation_invariance", "translation invariance (dot)"),
                  ("dot_monotonicity_local16", "monotonicity, offsets <= 16 (dot)"),
                  ("abs_position_mae", "absolute position probe MAE"),
                  ("relative_order_error", "relative order probe error"))


def plot_dimensions(dim: int, variant=None) -> list:
    """A handful of dimensions to draw as lines: for a sinusoid, the sin column of pairs from the
    fastest to the slowest (plus the cos of the fastest); otherwise evenly spread columns."""
    if variant is None:
        picks = sorted({0, 1, 2, dim // 8, dim // 4, dim // 2, dim - 1})
        return [d for d in picks if 0 <= d < dim]
    si, ci = pair_columns(dim, variant)
    half = dim // 2
    pairs = sorted({0, 1, half // 8, half // 4, half // 2, half - 1})
    return [int(ci[0])] + [int(si[i]) for i in pairs]


def sinusoid_figures(report: dict, extras: dict, out_dir: str) -> list:
    v = report["variant"]
    ex = extras[v]
    d, n = report["dim"], report["max_len"]
    tag = f"d={d}, N={n}"
    figs = []
    figs.append(plots.heatmap(ex["table"].numpy(), os.path.join(out_dir, "pe_heatmap.png"),
                              f"sinusoid ({v} layout), {tag}"))
    dims = plot_dimensions(d, v)
    wl = ex["wavelengths"]
    labels = [f"dim {k} (wavelength {float(wl[k]):.3g})" for k in dims]
    slow = [k for k in dims if float(wl[k]) >= n / 8] or dims[-1:]
    figs.append(plots.dimension_lines(ex["table"].numpy(), dims, os.path.join(out_dir, "pe_dimensions.png"),
                                      f"{v} layout, {tag}", labels, slow_dims=slow))
    figs.append(plots.wavelengths({name: e["wavelengths"].numpy() for name, e in extras.items()},
                                  os.path.join(out_dir, "wavelengths.png"), f"wavelength per dimension, d={d}",
                                  hline=float(n)))
    figs.append(plots.scale({name: (e["norms"].numpy(), e["dim_min"].numpy(), e["dim_max"].numpy())
                             for name, e in extras.items()}, os.path.join(out_dir, "scale.png"),
                            f"||PE(p)|| = sqrt(d/2) = {math.sqrt(d / 2):.4g}",
                            reference={"token norm (transformer init, x sqrt(d))":
                                       report["variants"][v]["scale"]["init_tokens"]["transformer"]["token_norm_expected"]}))
    figs.append(plots.proximity({name: e["gram"] for name, e in extras.items()}, os.path.join(out_dir, "proximity.png"),
                                f"dot-product proximity, {tag}"))
    series = {}
    for name, e in extras.items():
        series[f"{name}, float64"] = (e["relative_ks"], e["relative_per_k_float64"])
        series[f"{name}, float32"] = (e["relative_ks"], e["relative_per_k_float32"])
    figs.append(plots.relative_errors(series, os.path.join(out_dir, "relative_error.png"),
                                      f"exercise 3.1: PE(p+k) = M(k) PE(p), {tag}"))
    return [os.path.basename(f) for f in figs]


def checkpoint_figures(report: dict, extras: dict, out_dir: str) -> list:
    figs = []
    for side, ex in extras.items():
        kind = report["tables"][side]["kind"]
        t = ex["table"].numpy()
        figs.append(plots.heatmap(t, os.path.join(out_dir, f"{side}_heatmap.png"), f"{side} positions ({kind})"))
        figs.append(plots.dimension_lines(t, plot_dimensions(t.shape[1]),
                                          os.path.join(out_dir, f"{side}_dimensions.png"),
                                          f"{side} ({kind}): chosen dimensions"))
        figs.append(plots.cosine_heatmap(t, os.path.join(out_dir, f"{side}_cosine.png"),
                                         f"{side} ({kind}): cosine similarity of positions"))
        if ex.get("attention_logits") is not None:
            figs.append(plots.head_heatmaps(ex["attention_logits"],
                                            os.path.join(out_dir, f"{side}_attention_logits.png"),
                                            f"{side} ({kind}): layer-0 attention logits of position pairs, per head"))
    if extras:
        n = max(e["table"].shape[0] for e in extras.values())
        figs.append(plots.wavelengths({s: e["periods"].numpy() for s, e in extras.items()},
                                      os.path.join(out_dir, "periods.png"), "dominant period of each dimension (DFT)",
                                      ylabel="period (positions)", hline=float(n)))
        figs.append(plots.scale({s: (e["norms"].numpy(), e["dim_min"].numpy(), e["dim_max"].numpy())
                                 for s, e in extras.items()}, os.path.join(out_dir, "scale.png"),
                                "position vector norms"))
        figs.append(plots.proximity({s: e["gram"] for s, e in extras.items()}, os.path.join(out_dir, "proximity.png"),
                                    "dot-product proximity"))
    biases = {side: t["relative_bias"] for side, t in report["tables"].items() if "relative_bias" in t}
    if biases:
        series = {}
        for side, b in biases.items():
            heads = [f"head {h['head']}" + (f", slope {h['slope']:.3g}" if "slope" in h else "") for h in b["per_head"]]
            series[f"{side}: {b['kind']}{' (fixed)' if not b['learned'] else ''}, "
                    f"{'causal' if b['causal'] else 'bidirectional'}"] = (b["distances"], b["bias"], heads)
        figs.append(plots.bias_profiles(series, os.path.join(out_dir, "relative_bias.png"),
                                        "relative attention bias per head against the distance key - query"))
    vectors = {side: t["relative_vectors"] for side, t in report["tables"].items() if "relative_vectors" in t}
    for measure, ylabel in (("norm", "norm of the vector"), ("cosine_with_distance_0", "cosine with distance 0")):
        if vectors:
            series = {f"{side}: {v['kind']} {table} ({'a^K' if table == 'keys' else 'a^V'})":
                      (v["distances"], v[table][measure], [f"layer {i}" for i in range(len(v[table][measure]))])
                      for side, v in vectors.items() for table in ("keys", "values")}
            figs.append(plots.bias_profiles(series, os.path.join(out_dir, f"relative_vectors_{measure}.png"),
                                            "relative key and value vectors per layer against the distance key - "
                                            "query (clipped)", ylabel=ylabel))
    return [os.path.basename(f) for f in figs]


def bases_figures(report: dict, extras: dict, out_dir: str) -> list:
    rows = report["rows"]
    d, n, v = report["dim"], report["max_len"], report["variant"]
    fig = plots.bases_figure(rows, extras, os.path.join(out_dir, "bases.png"),
                             f"what the base does: sinusoid ({v} layout), d={d}, N={n}", n)
    return [os.path.basename(fig)]


def sweep_figures(report: dict, rows: list, extras: dict, out_dir: str) -> list:
    references = {}
    for ref in report.get("init_reference", []):
        for suffix, _ in SCATTER_PANELS:
            value = ref["values"].get(suffix)
            if value is not None:
                references.setdefault(f"{'enc' if ref['side'] == 'encoder' else 'dec'}_{suffix}", value)
    figures = [plots.sweep_scatter(rows, os.path.join(out_dir, "sweep_properties.png"),
                                   f"position tables of {os.path.basename(report['sweep'])} against BLEU "
                                   "(one point per cell; dashed: a freshly initialised table)",
                                   SCATTER_PANELS, references)]
    tables = {}
    for name, ex in extras.items():
        for side, e in (ex or {}).items():
            tables[f"{name} {side}"] = e["table"].numpy()
    if tables:
        figures.append(plots.cosine_grid(tables, os.path.join(out_dir, "sweep_cosine.png"),
                                         "cosine similarity of positions, per cell and side"))
    return [os.path.basename(f) for f in figures]


__all__ = ["SCATTER_PANELS", "bases_figures", "checkpoint_figures", "plot_dimensions", "sinusoid_figures",
           "sweep_figures"]
