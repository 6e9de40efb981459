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
