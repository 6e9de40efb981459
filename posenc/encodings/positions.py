"""Padding-aware integer positions (fairseq's convention)."""

import torch


def make_positions(tokens: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """Positions of ``tokens`` ``(B, T)`` -> ``(B, T)`` long.

    Real tokens are numbered ``padding_idx + 1, padding_idx + 2, ...`` from the first non-pad
    token, whichever side the padding is on; pad tokens get ``padding_idx``, the table's zero row.
    Same arithmetic as ``fairseq.utils.make_positions``, so tables stay interchangeable.
    """
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def step_positions(tokens: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """The position of the newest token during incremental decoding, ``(1, 1)`` long.

    ``tokens`` ``(B, t)`` is the whole prefix decoded so far; the step's position is
    ``padding_idx + t`` for every sentence, as in fairseq's incremental decoders.
    """
    return torch.full((1, 1), padding_idx + tokens.size(1), dtype=torch.long, device=tokens.device)


def relative_positions(q_len: int, k_len: int, offset: int = 0, device=None) -> torch.Tensor:
    """Key position minus query position, ``(q_len, k_len)`` long.

    Queries sit at ``offset .. offset + q_len - 1`` (``offset`` = the number of cached steps
    during incremental decoding), keys at ``0 .. k_len - 1``. Only differences are used, so
    padding on the left of every sentence shifts nothing: pad keys are masked, and the real
    tokens keep their distances to each other.
    """
    queries = torch.arange(offset, offset + q_len, device=device)
    keys = torch.arange(k_len, device=device)
    return keys[None, :] - queries[:, None]
