"""Position kinds registered from outside the package, one of each act: a fairseq ``--user-dir``
of its own.

fairseq imports one ``--user-dir``, so this one imports the posenc plugin (its models) and
registers its kinds beside the built-in ones; then ``--encoder-pos ramp`` (and the others) are
valid wherever the flags are (``fairseq-train``, ``fairseq-generate``, ``fairseq-validate`` with
``--user-dir tests/toy_kind``), and so are the kinds' own flags. docs/plugin.md ("Adding a position
kind") walks through it. Each kind is one class and one registration:

- ``ramp`` (embeddings): the token at position p (0: the first real token) gets ``p * slope``
  added, ``slope`` a learned vector of the embedding's width; pads get nothing.
- ``swirl`` (queries_keys): the first pair of each head's dimensions rotated by ``p * angle``
  (``--swirl-angle``), the rest left alone: RoPE reduced to one frequency.
- ``gate`` (logits, query-dependent): ``-softplus(q . u_h) * |j - i|``, a distance penalty whose
  slope each query sets through a learned vector ``u_h`` per head (a one-line cousin of CoPE's
  ``forward(query, attn_logits)``); one module per side, shared by its layers.
- ``nudge`` (keys_values): a learned vector for each sign of ``j - i`` (before, same, after) added
  to the keys and one to the values, Shaw et al. with k = 1.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import posenc.fairseq_plugin  # noqa: F401  (registers the posenc_* models and architectures)
from posenc.kinds import EMBEDDINGS, KEYS_VALUES, LOGITS, QUERIES_KEYS, Side, option, register_kind

INITIAL_SLOPE = 0.01


class RampEmbedding(nn.Module):
    """forward(tokens ``(B, T)``) -> ``(B, T, D)``; in a decoding step (``incremental_state`` not
    None, ``tokens`` the whole prefix) the newest position's ``(B, 1, D)``."""

    def __init__(self, embed_dim: int, padding_idx: int, max_positions: int):
        super().__init__()
        self.padding_idx = padding_idx
        self.max_positions = max_positions  # what the model reports: the stock learned limit
        self.slope = nn.Parameter(torch.full((embed_dim,), INITIAL_SLOPE))

    def forward(self, tokens, incremental_state=None, positions=None):
        real = tokens.ne(self.padding_idx)
        p = (real.cumsum(dim=1) - 1).clamp(min=0) * real  # 0, 1, ... from the first real token
        if incremental_state is not None:
            p = p[:, -1:]
        return p[..., None].to(self.slope.dtype) * self.slope


@register_kind("ramp", families=("fconv", "transformer"), acts=EMBEDDINGS)
def build_ramp(side: Side) -> RampEmbedding:
    return RampEmbedding(side.embed_dim, side.padding_idx, side.max_positions)


@dataclass
class SwirlOptions:
    swirl_angle: float = option(0.3, "swirl's rotation per position, in radians")


class Swirl(nn.Module):
    """forward(x ``(B, H, T, Dh)``, offset) -> x with dims 0 and 1 rotated by (offset + t) * angle."""

    def __init__(self, angle: float):
        super().__init__()
        self.angle = angle

    def forward(self, x, offset=0):
        theta = (torch.arange(x.size(2), device=x.device) + offset).to(x.dtype)[:, None] * self.angle
        first, second = x[..., :1], x[..., 1:2]
        turned = torch.cat([first * theta.cos() - second * theta.sin(), first * theta.sin() + second * theta.cos()],
                           dim=-1)
        return torch.cat([turned, x[..., 2:]], dim=-1)


@register_kind("swirl", families="transformer", acts=QUERIES_KEYS, options=SwirlOptions)
def build_swirl(side: Side) -> Swirl:
    return Swirl(side.args.swirl_angle)


class QueryGate(nn.Module):
    """forward(q_len, k_len, offset, dtype=, query=) -> ``(B, H, q_len, k_len)``: minus
    softplus(query . u_h) times the distance |j - i|."""

    uses_query = True  # the attention passes the scaled queries

    def __init__(self, num_heads: int, head_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.u = nn.Parameter(torch.zeros(num_heads, head_dim))

    def forward(self, q_len, k_len, offset=0, dtype=torch.float32, query=None):
        distance = (torch.arange(k_len, device=query.device)[None, :]
                    - torch.arange(offset, offset + q_len, device=query.device)[:, None]).abs()
        slope = F.softplus(torch.einsum("bhtd,hd->bht", query, self.u.to(query.dtype)))  # (B, H, T)
        return (-slope[..., None] * distance.to(query.dtype)).to(dtype)


@register_kind("gate", families="transformer", acts=LOGITS)
def build_gate(side: Side) -> QueryGate:
    return QueryGate(side.num_heads, side.head_dim)


class Nudge(nn.Module):
    """Shaw et al.'s terms with three rows: j before i, j = i, j after i."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.keys = nn.Parameter(torch.zeros(3, head_dim))  # zero: the layer starts as plain attention
        self.values = nn.Parameter(torch.zeros(3, head_dim))

    def _rows(self, q_len, k_len, offset, device):
        relative = torch.arange(k_len, device=device)[None, :] - torch.arange(offset, offset + q_len, device=device)[
            :, None]
        return relative.sign() + 1  # 0, 1, 2

    def key_logits(self, q, k_len, offset=0):
        rows = self._rows(q.size(2), k_len, offset, q.device)
        return torch.einsum("bhtd,tsd->bhts", q, self.keys.to(q.dtype)[rows])

    def value_term(self, weights, offset=0):
        rows = self._rows(weights.size(2), weights.size(3), offset, weights.device)
        return torch.einsum("bhts,tsd->bhtd", weights, self.values.to(weights.dtype)[rows])


@register_kind("nudge", families="transformer", acts=KEYS_VALUES)
def build_nudge(side: Side) -> Nudge:
    return Nudge(side.head_dim)
