"""What relative key and value vectors say (:class:`posenc.analysis.read.relative_vectors.RelativeVectors`):
per layer and distance, the norm of each vector and its cosine with the vector of distance 0, and
how much the vectors of neighbouring distances differ (a table that learned nothing about order
would show no structure in distance).
"""

import torch

from posenc.analysis.read.relative_vectors import RelativeVectors


def _profile(tables: torch.Tensor, k: int) -> dict:
    """Per layer: the norm of each distance's vector, its cosine with distance 0's, and the mean
    norm of the step between neighbouring distances over the mean vector norm."""
    norms = tables.norm(dim=-1)  # (L, 2k+1)
    zero = tables[:, k : k + 1]
    cosine = (tables * zero).sum(-1) / (norms * zero.norm(dim=-1)).clamp_min(1e-300)
    steps = (tables[:, 1:] - tables[:, :-1]).norm(dim=-1).mean(dim=1) / norms.mean(dim=1).clamp_min(1e-300)
    return {"norm": norms.tolist(), "cosine_with_distance_0": cosine.tolist(),
            "neighbour_step_over_norm": steps.tolist()}


def vectors_summary(vectors: RelativeVectors) -> dict:
    """JSON-ready report of a :class:`posenc.analysis.read.relative_vectors.RelativeVectors`."""
    return {
        "kind": vectors.kind,
        "source": vectors.source,
        "settings": vectors.settings,
        "distance": "key position - query position, clipped to -k..k",
        "distances": vectors.distances.tolist(),
        "keys": _profile(vectors.keys, vectors.max_distance),      # [layer][distance index]
        "values": _profile(vectors.values, vectors.max_distance),
        "notes": list(vectors.notes),
    }


__all__ = ["vectors_summary"]
