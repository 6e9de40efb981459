"""Figures, drawn on ``matplotlib.figure.Figure`` objects with the Agg canvas: no pyplot, no
global state, no display needed."""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100


def _new(width=8.0, height=4.5, ncols=1, nrows=1):
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
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


__all__ = ["cosine_heatmap", "dimension_lines", "heatmap", "proximity", "relative_errors", "scale", "wavelengths"]
