"""Figures, drawn on ``matplotlib.figure.Figure`` objects with the Agg canvas: no pyplot, no
global state, no display needed."""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from posenc.atomic import atomic_file

DPI = 100


def _new(width=8.0, height=4.5, ncols=1, nrows=1):
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _save(fig, path):
    fig.tight_layout()
    with atomic_file(path) as handle:  # a reader never sees half a PNG
        fig.savefig(handle, format="png", dpi=DPI)
    return str(path)


def heatmap(table, path, title):
    t = np.asarray(table, dtype=np.float64)
    fig, ax = _new(8, 5)
    ax = ax[0, 0]
    lim = float(np.abs(t).max()) or 1.0
    im = ax.imshow(t, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim)  # antialiased: no moire
    ax.set_xlabel("dimension")
    ax.set_ylabel("position p")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return _save(fig, path)


def dimension_lines(table, dims, path, title, labels=None, slow_dims=None, zoom=64):
    """Left: ``dims`` over the first ``zoom`` positions (where fast dimensions are readable);
    right: ``slow_dims`` (default: ``dims``) over all positions."""
    t = np.asarray(table, dtype=np.float64)
    n = t.shape[0]
    fig, axes = _new(11, 4, ncols=2)
    left, right = axes[0]
    labels = labels or [f"dim {d}" for d in dims]
    z = min(n, zoom)
    for d, label in zip(dims, labels):
        left.plot(np.arange(z), t[:z, d], lw=1, marker=".", ms=2, label=label)
    slow = dims if slow_dims is None else slow_dims
    for d in slow:
        right.plot(np.arange(n), t[:, d], lw=1, label=labels[dims.index(d)] if d in dims else f"dim {d}")
    left.set_title(f"{title}: first {z} positions")
    right.set_title("all positions" + ("" if slow_dims is None else " (slow dimensions)"))
    for ax in (left, right):
        ax.set_xlabel("position p")
        ax.set_ylabel("value")
    left.legend(fontsize=6, ncol=2, loc="lower left")
    right.legend(fontsize=6, loc="lower left")
    return _save(fig, path)


def wavelengths(series: dict, path, title, ylabel="wavelength 2*pi/w (positions)", hline=None):
    fig, ax = _new(8, 4)
    ax = ax[0, 0]
    for name, values in series.items():
        v = np.asarray(values, dtype=np.float64)
        ax.plot(np.arange(len(v)), v, ".", ms=2, label=name)
    if hline is not None:
        ax.axhline(hline, color="grey", lw=0.8, ls="--", label=f"{hline:g} (table length)")
    ax.set_yscale("log")
    ax.set_xlabel("dimension")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def scale(series: dict, path, title, reference=None):
    """``series``: name -> (norms per position, per-dim min, per-dim max)."""
    fig, axes = _new(11, 4, ncols=2)
    left, right = axes[0]
    for name, (norms, lo, hi) in series.items():
        line, = left.plot(np.arange(len(norms)), norms, lw=1, label=name)
        dims = np.arange(len(lo))
        right.plot(dims, hi, "^", ms=1.5, color=line.get_color(), label=f"{name}: max")
        right.plot(dims, lo, "v", ms=1.5, color=line.get_color(), alpha=0.6, label=f"{name}: min")
    top = max([float(np.max(s[0])) for s in series.values()] + list((reference or {}).values()))
    for name, value in (reference or {}).items():
        left.axhline(value, ls="--", lw=0.8, color="grey")
        left.annotate(f"{name}: {value:.4g}", (0, value), fontsize=7, va="bottom")
    left.set_ylim(0, 1.15 * top)
    left.set_xlabel("position p")
    left.set_ylabel("||PE(p)||")
    left.set_title(title)
    left.legend(fontsize=7)
    right.set_xlabel("dimension")
    right.set_ylabel("min and max over positions")
    right.set_title("per-dimension range")
    right.legend(fontsize=7)
    return _save(fig, path)


def proximity(series: dict, path, title, anchors=None):
    """``series``: name -> Gram matrix phi (N x N). Left: phi(x, x+m) against the offset m for a
    few anchors x (one curve each); right: the mean over anchors with its min..max band."""
    fig, axes = _new(11, 4, ncols=2)
    left, right = axes[0]
    for name, g in series.items():
        g = np.asarray(g)
        n = g.shape[0]
        for x in anchors or sorted({0, n // 4, n // 2}):
            m = np.arange(-x, n - x)
            left.plot(m, g[x], lw=0.8, label=f"{name}, x={x}")
        offsets = np.arange(n)
        diag = [np.diagonal(g, k) for k in offsets]
        mean = np.array([d.mean() for d in diag])
        right.plot(offsets, mean, lw=1, label=f"{name}: mean over x")
        right.fill_between(offsets, [d.min() for d in diag], [d.max() for d in diag], alpha=0.25)
    left.set_xlabel("offset m = y - x")
    left.set_ylabel("phi(x, y) = <PE_x, PE_y>")
    left.set_title(title)
    left.legend(fontsize=6)
    right.set_xlabel("offset m")
    right.set_ylabel("phi(x, x+m), min..max over x")
    right.set_title("translation invariance: a band of width 0 is exact")
    right.legend(fontsize=7)
    return _save(fig, path)


def relative_errors(series: dict, path, title):
    """``series``: name -> (ks, max error at each k)."""
    fig, ax = _new(8, 4)
    ax = ax[0, 0]
    for name, (ks, errs) in series.items():
        e = np.maximum(np.asarray(errs, dtype=np.float64), 1e-18)
        ax.plot(ks, e, lw=0.8, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("offset k")
    ax.set_ylabel("max |PE(p+k) - M(k) PE(p)| over p")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def cosine_heatmap(table, path, title):
    t = np.asarray(table, dtype=np.float64)
    norms = np.linalg.norm(t, axis=1, keepdims=True)
    c = (t / np.maximum(norms, 1e-300)) @ (t / np.maximum(norms, 1e-300)).T
    fig, ax = _new(6, 5)
    ax = ax[0, 0]
    im = ax.imshow(c, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("position")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return _save(fig, path)


def head_heatmaps(logits, path, title):
    """One panel per head of ``(H, N, N)`` attention logits (row: query position, column: key)."""
    g = np.asarray(logits, dtype=np.float64)
    heads = g.shape[0]
    cols = min(heads, 4)
    rows = (heads + cols - 1) // cols
    fig, axes = _new(3.2 * cols, 3.0 * rows + 0.4, ncols=cols, nrows=rows)
    for h in range(rows * cols):
        ax = axes[h // cols, h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        lim = float(np.abs(g[h]).max()) or 1.0
        im = ax.imshow(g[h], cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key position y", fontsize=8)
        ax.set_ylabel("query position x", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


__all__ = ["cosine_heatmap", "head_heatmaps", "dimension_lines", "heatmap", "proximity", "relative_errors", "scale",
           "wavelengths"]


def bases_figure(rows, extras, path, title, max_len):
    """Four panels, one curve or point per base: the proximity f(m) over the offset, the pair
    wavelengths, exercise 3.1's float32 error per offset, and the probes' errors."""
    fig, axes = _new(12, 8, ncols=2, nrows=2)
    (prox, wl), (rel, probe) = axes
    for row in rows:
        ex = extras[row["base"]]
        label = f"base {row['base']:g}"
        f = np.asarray(ex["profile"], dtype=np.float64)
        line, = prox.plot(np.arange(len(f)), f / f[0], lw=0.9, label=label)
        stop = row["monotone_up_to"]
        prox.plot([stop], [f[stop] / f[0]], "o", ms=4, color=line.get_color())
        w = np.asarray(ex["pair_wavelengths"], dtype=np.float64)
        wl.plot(np.arange(len(w)), w, ".", ms=2.5, color=line.get_color(), label=label)
        errs = np.asarray(ex["relative_per_k_float32"], dtype=np.float64)
        rel.plot(np.arange(1, len(errs) - 1), errs[1:-1], lw=0.7, color=line.get_color(), label=label)
    prox.set_xscale("symlog", linthresh=10)
    prox.set_xlabel("offset m")
    prox.set_ylabel("f(m) / f(0), f(m) = <PE_x, PE_x+m>")
    prox.set_title("dot-product proximity; dot: where f stops falling")
    prox.legend(fontsize=7)
    wl.axhline(max_len, color="grey", lw=0.8, ls="--", label=f"N = {max_len}")
    wl.set_yscale("log")
    wl.set_xlabel("sin/cos pair i (fastest first)")
    wl.set_ylabel("wavelength 2*pi/w_i (positions)")
    wl.set_title("wavelengths")
    wl.legend(fontsize=7)
    rel.set_yscale("log")
    rel.set_ylim(1e-7, 1e-3)
    rel.set_xlabel("offset k (1 .. N-2; k = 0 and N-1 check nothing or one row)")
    rel.set_ylabel("max |PE(p+k) - M(k) PE(p)| over p")
    rel.set_title("exercise 3.1, float32 table: the fastest pair (w = 1, every base) dominates")
    rel.legend(fontsize=7, ncol=2, loc="lower center")
    bases = np.array([r["base"] for r in rows], dtype=np.float64)
    if all("absolute_position_mae" in r for r in rows):
        probe.plot(bases, [r["absolute_position_mae"] for r in rows], "o-", label="absolute position MAE (positions)")
        ax2 = probe.twinx()
        ax2.plot(bases, [r["relative_order_error"] for r in rows], "s--", color="C3", label="relative order error")
        ax2.set_ylabel("relative order error (chance 0.5)")
        ax2.set_ylim(0, 1)
        ax2.legend(fontsize=7, loc="center right")
        probe.set_yscale("symlog", linthresh=1e-3)
    probe.plot(bases, [r["monotone_up_to"] for r in rows], "^:", color="C2", label="f(m) falls up to offset m")
    probe.set_xscale("log")
    probe.set_xlabel("base")
    probe.set_ylabel("positions")
    probe.set_title("probes (held-out positions) and monotone range")
    probe.legend(fontsize=7, loc="upper right")
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


PLACEMENT_COLORS = {"both": "C0", "source": "C1", "target": "C2", "none": "C7"}


def sweep_scatter(rows, path, title, panels, references=None):
    """BLEU of each measured cell against each indicator in ``panels`` (``(column suffix,
    label)``), one row of panels per side; colour = placement; a dashed vertical line at
    ``references[column]`` where given."""
    sides = (("enc", "encoder"), ("dec", "decoder"))
    fig, axes = _new(3.3 * len(panels), 6.4, ncols=len(panels), nrows=2)
    for r, (prefix, side) in enumerate(sides):
        for c, (suffix, label) in enumerate(panels):
            ax = axes[r, c]
            seen = set()
            for row in rows:
                x, y = row.get(f"{prefix}_{suffix}"), row.get("bleu")
                if x is None or y is None:
                    continue
                placement = str(row.get("placement"))
                ax.plot([x], [y], "o", ms=5, color=PLACEMENT_COLORS.get(placement, "k"),
                        label=placement if placement not in seen else None)
                seen.add(placement)
            ref = (references or {}).get(f"{prefix}_{suffix}")
            if ref is not None and seen:
                ax.axvline(ref, color="grey", ls="--", lw=0.8, label="fresh init")
            ax.set_xlabel(f"{side}: {label}", fontsize=8)
            ax.set_ylabel("BLEU", fontsize=8)
            if seen:
                ax.legend(fontsize=6)
            else:
                ax.text(0.5, 0.5, f"no {side} table", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def cosine_grid(tables: dict, path, title):
    """Cosine similarity of positions for each ``label -> (N, D) table``, small multiples."""
    labels = list(tables)
    cols = min(len(labels), 6) or 1
    nrows = max(1, (len(labels) + cols - 1) // cols)
    fig, axes = _new(2.4 * cols, 2.5 * nrows + 0.5, ncols=cols, nrows=nrows)
    for i in range(nrows * cols):
        ax = axes[i // cols, i % cols]
        if i >= len(labels):
            ax.axis("off")
            continue
        t = np.asarray(tables[labels[i]], dtype=np.float64)
        u = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-300)
        ax.imshow(u @ u.T, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(labels[i], fontsize=6)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


__all__ += ["bases_figure", "cosine_grid", "sweep_scatter"]


def bias_profiles(series: dict, path, title, ylabel="bias added to the logit"):
    """One panel per ``label -> (distances (K,), bias (H, K), head labels)``: the bias each head
    adds to an attention logit against the distance key - query, one line per head (or any other
    per-distance value, one line per row, under ``ylabel``)."""
    labels = list(series)
    fig, axes = _new(5.5 * len(labels), 4.2, ncols=len(labels))
    for ax, label in zip(axes[0], labels):
        distances, bias, heads = series[label]
        d = np.asarray(distances)
        b = np.asarray(bias, dtype=np.float64)
        for h in range(b.shape[0]):
            ax.plot(d, b[h], lw=1, marker=".", ms=2.5, label=heads[h])
        ax.axvline(0, color="grey", lw=0.6, ls=":")
        far = int(np.abs(d).max())
        if far > 32:  # T5's exact buckets sit near 0, its log-spaced ones far out
            ax.set_xscale("symlog", linthresh=8)
            ticks = [t for t in (1, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if t < far] + [far]
            ticks = sorted({0, *(-t for t in ticks), *(t for t in ticks if d.max() > 0)})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks], fontsize=7)
        ax.set_xlim(d.min() * 1.05 - 0.5, d.max() * 1.05 + 0.5)
        ax.set_xlabel("distance key - query (negative: key before the query)")
        ax.set_ylabel(ylabel)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=6, ncol=2 if b.shape[0] > 8 else 1)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


__all__ += ["bias_profiles"]
