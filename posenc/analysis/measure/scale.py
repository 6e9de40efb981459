"""Exercise 3.3: the scale of a position table, alone and next to the token embeddings it is
added to.

fairseq's Transformer draws token embeddings from N(0, D^-1/2) and multiplies them by
``embed_scale = sqrt(D)`` (unless ``--no-scale-embedding``), so each scaled entry is N(0, 1) and a
token vector has norm ~ sqrt(D); the sinusoid row has norm exactly sqrt(D/2) (one sin^2 + cos^2
per pair), hence a ratio of ~ 1/sqrt(2). ConvS2S draws tokens from N(0, 0.1) and does not scale
them.
"""

import math

import torch


def norm_stats(table: torch.Tensor) -> dict:
    norms = table.to(torch.float64).norm(dim=1)
    return {
        "norm_mean": float(norms.mean()),
        "norm_std": float(norms.std(unbiased=False)),
        "norm_min": float(norms.min()),
        "norm_max": float(norms.max()),
    }


def dim_ranges(table: torch.Tensor) -> dict:
    t = table.to(torch.float64)
    lo, hi = t.min(dim=0).values, t.max(dim=0).values
    span = hi - lo
    return {
        "value_min": float(lo.min()),
        "value_max": float(hi.max()),
        "dim_range_mean": float(span.mean()),
        "dim_range_min": float(span.min()),
        "dim_range_max": float(span.max()),
        "per_dim_min": lo.tolist(),
        "per_dim_max": hi.tolist(),
    }


def expected_gaussian_norm(dim: int, std: float) -> float:
    """E ||x|| for x ~ N(0, std^2 I_dim): std * sqrt(2) * Gamma((d+1)/2) / Gamma(d/2)."""
    return std * math.sqrt(2.0) * math.exp(math.lgamma((dim + 1) / 2) - math.lgamma(dim / 2))


def init_token_comparison(pe_norm_mean: float, dim: int, samples: int = 2000, seed: int = 0) -> dict:
    """Ratio of the mean PE norm to freshly initialised token embeddings as fairseq adds them:
    Transformer (N(0, D^-1/2) times sqrt(D)) and ConvS2S (N(0, 0.1), unscaled); closed-form
    expectation and a seeded sample of ``samples`` token rows."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, std, scale in (("transformer", dim**-0.5, math.sqrt(dim)), ("fconv", 0.1, 1.0)):
        expected = expected_gaussian_norm(dim, std) * scale
        sample = (torch.randn(samples, dim, generator=gen, dtype=torch.float64) * std * scale).norm(dim=1).mean()
        out[name] = {
            "init_std": std,
            "embed_scale": scale,
            "token_norm_expected": expected,
            "token_norm_sampled": float(sample),
            "pe_to_token_norm_ratio": pe_norm_mean / expected,
        }
    return out


def token_norms(weight: torch.Tensor, embed_scale: float, padding_idx=None) -> dict:
    """Norms of a trained token-embedding matrix as the model adds it (times ``embed_scale``),
    without the padding row."""
    w = weight.to(torch.float64)
    if padding_idx is not None and 0 <= padding_idx < w.size(0):
        w = torch.cat([w[:padding_idx], w[padding_idx + 1 :]])
    norms = w.norm(dim=1) * embed_scale
    return {"tokens": int(w.size(0)), "embed_scale": embed_scale, "token_norm_mean": float(norms.mean()),
            "token_norm_std": float(norms.std(unbiased=False))}


__all__ = ["dim_ranges", "expected_gaussian_norm", "init_token_comparison", "norm_stats", "token_norms"]
