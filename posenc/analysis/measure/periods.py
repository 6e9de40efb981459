"""Exercise 3.2: the values of a table, the wavelength of each sinusoid dimension, and the
dominant period of each dimension of any table (for learned ones)."""

import math

import torch

from posenc.analysis.measure.relative_linear import pair_columns
from posenc.encodings.defaults import SINUSOID_BASE
from posenc.encodings.sinusoidal import sinusoid_frequencies


def sinusoid_wavelengths(dim: int, variant: str = "paper", base: float = SINUSOID_BASE) -> torch.Tensor:
    """Wavelength 2*pi / w of every dimension ``(D,)`` (float64); both dims of a pair share it."""
    freqs = sinusoid_frequencies(dim, variant, dtype=torch.float64, base=base)
    out = torch.full((dim,), float("nan"), dtype=torch.float64)
    si, ci = pair_columns(dim, variant)
    out[si] = 2 * math.pi / freqs
    out[ci] = 2 * math.pi / freqs
    return out


def dominant_periods(table: torch.Tensor) -> torch.Tensor:
    """Period (in positions) of the strongest non-constant Fourier component of each column,
    ``(D,)`` float64. The resolution is that of an N-point DFT: periods N/1, N/2, ... only, so a
    column whose wavelength exceeds N reports N."""
    x = table.to(torch.float64)
    x = x - x.mean(dim=0, keepdim=True)
    spectrum = torch.fft.rfft(x, dim=0).abs()[1:]  # drop the constant bin
    if spectrum.size(0) == 0:
        return torch.full((table.size(1),), float("nan"), dtype=torch.float64)
    bins = spectrum.argmax(dim=0) + 1
    return table.size(0) / bins.to(torch.float64)


__all__ = ["dominant_periods", "sinusoid_wavelengths"]
