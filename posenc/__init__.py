"""posenc: positional-embedding ablations for fairseq translation models."""

__version__ = "0.1.0"
