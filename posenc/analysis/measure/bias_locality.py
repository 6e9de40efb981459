"""What a relative attention bias says, per head, in the numbers a reader looks for: the bias at
distance 0, one step back and forward, at the far end; where it peaks; and whether it falls with
|distance| in each direction (a *locality* head) or not.

Directions: *back* are keys before the query (distance key - query < 0), *forward* keys after
it (> 0; the causal decoder has none). A direction *falls* when the bias never rises from
|d| = 0 to the far end (T5's buckets make ties; ALiBi falls strictly).
"""

import torch

from posenc.analysis.read.relative_bias import DISTANCE

LOCALITY = {
    "local": "never rises with |distance| in any direction, and falls somewhere",
    "anti-local": "never falls with |distance| in any direction, and rises somewhere",
    "flat": "the same bias at every distance",
    "mixed": "rises and falls with |distance|",
}


def _direction(distances, values, sign):
    """The bias at |d| = 0, 1, ..., far in one direction (sign -1: back, +1: forward), or None."""
    picked = values[(distances * sign >= 0)]
    if picked.numel() < 2:
        return None
    return picked.flip(0) if sign < 0 else picked


def _value_at(distances, values, d):
    hit = (distances == d).nonzero()
    return float(values[hit[0, 0]]) + 0.0 if hit.numel() else None  # + 0.0: ALiBi's -0.0 at d = 0 reads 0


def head_summary(distances: torch.Tensor, values: torch.Tensor) -> dict:
    """Summary of one head's bias ``values`` (K,) at ``distances`` (K,), key - query."""
    far = int(distances.abs().max())
    directions = {name: _direction(distances, values, sign) for name, sign in (("back", -1), ("forward", 1))}
    directions = {k: v for k, v in directions.items() if v is not None}
    falls = {k: bool((v.diff() <= 0).all()) for k, v in directions.items()}
    rises = {k: bool((v.diff() >= 0).all()) for k, v in directions.items()}
    if bool((values == values[0]).all()):
        locality = "flat"
    elif all(falls.values()):
        locality = "local"
    elif all(rises.values()):
        locality = "anti-local"
    else:
        locality = "mixed"
    # the distance with the largest bias; among ties the nearest, back before forward
    order = sorted(range(distances.numel()),
                   key=lambda i: (-float(values[i]), abs(int(distances[i])), int(distances[i])))
    return {
        "at_0": _value_at(distances, values, 0),
        "at_minus_1": _value_at(distances, values, -1),
        "at_plus_1": _value_at(distances, values, 1),
        "at_far_back": _value_at(distances, values, -far),
        "at_far_forward": _value_at(distances, values, far),
        "min": float(values.min()) + 0.0,
        "max": float(values.max()) + 0.0,
        "peak_distance": int(distances[order[0]]),
        "falls_back": falls.get("back"),
        "falls_forward": falls.get("forward"),
        "locality": locality,
    }


def bias_summary(bias) -> dict:
    """JSON-ready report of a :class:`posenc.analysis.read.relative_bias.RelativeBias`."""
    far = int(bias.distances.abs().max())
    per_head = []
    for h in range(bias.heads):
        entry = {"head": h, **head_summary(bias.distances, bias.values[h])}
        if bias.slopes is not None:
            entry["slope"] = float(bias.slopes[h])
        if bias.weight is not None:
            entry["weight_std"] = float(bias.weight[:, h].double().std(unbiased=False))
        per_head.append(entry)
    counts = {name: sum(h["locality"] == name for h in per_head) for name in LOCALITY}
    report = {
        "kind": bias.kind,
        "learned": bias.weight is not None,
        "causal": bias.causal,
        "heads": bias.heads,
        "source": bias.source,
        "settings": bias.settings,
        "distance": DISTANCE,
        "far": far,
        "distance_range": f"{-far}..{0 if bias.causal else far}",
        "distances": bias.distances.tolist(),
        "bias": bias.values.tolist(),  # [head][distance index]
        "per_head": per_head,
        "locality_counts": counts,
        "locality_definitions": LOCALITY,
        "notes": list(bias.notes),
    }
    if bias.slopes is not None:
        report["slopes"] = bias.slopes.tolist()
        report["fixed"] = "no learned parameters: the bias is -slope_h * |distance|, the same for every checkpoint"
    if bias.buckets is not None:
        report["buckets"] = bias.buckets.tolist()
    if bias.weight is not None:
        w = bias.weight.double()
        report["weight"] = {"shape": list(w.shape), "std": float(w.std(unbiased=False)),
                            "max_abs": float(w.abs().max()),
                            "init_std": bias.init_std,
                            "std_over_init": float(w.std(unbiased=False)) / bias.init_std if bias.init_std else None,
                            "note": "init_std: the std the plugin draws the table from (d_model^-0.5); a ratio near 1 "
                                    "means the spread of the learned bias stayed at its initial scale"}
    return report


def short_summary(report: dict) -> str:
    """One line for a sweep's table: kind, heads by locality, the bias at 0 and at the far end."""
    heads = report["per_head"]
    counts = ", ".join(f"{n} {name}" for name, n in report["locality_counts"].items() if n)
    at0 = [h["at_0"] for h in heads]
    back = [h["at_far_back"] for h in heads]
    text = f"{report['kind']}{' (fixed)' if not report['learned'] else ''}, {report['heads']} heads: {counts}"
    if report.get("slopes"):
        text += f"; slopes {max(report['slopes']):.3g}..{min(report['slopes']):.3g}"
    else:
        text += f"; b(0) {min(at0):.3g}..{max(at0):.3g}, b(-{report['far']}) {min(back):.3g}..{max(back):.3g}"
    return text


__all__ = ["LOCALITY", "bias_summary", "head_summary", "short_summary"]
