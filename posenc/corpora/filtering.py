"""Filtering of training pairs (never valid or test), both sides together, with counts.

Same rules as Moses' clean-corpus-n.perl, which fairseq's prepare-*.sh scripts run on the
tokenized training text: a pair goes if either side is empty, shorter than `min_len` or longer
than `max_len` tokens, or if one side is more than `max_ratio` times as long as the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import CorpusError

REASONS = ("empty", "too_short", "too_long", "ratio")


@dataclass(frozen=True)
class FilterSettings:
    min_len: int = 1
    max_len: int = 250
    max_ratio: float = 9.0  # clean-corpus-n's default; fairseq's WMT/IWSLT recipes use 1.5

    def check(self) -> None:
        if not 1 <= self.min_len <= self.max_len:
            raise CorpusError(
                f"data.filter: need 1 <= min_len ({self.min_len}) <= max_len ({self.max_len})"
            )
        if self.max_ratio < 1:
            raise CorpusError(f"data.filter.max_ratio={self.max_ratio}: must be >= 1")

    def as_dict(self) -> dict:
        return asdict(self)


def reason_to_drop(src_tokens: int, tgt_tokens: int, settings: FilterSettings) -> str | None:
    """The first rule a pair breaks (in REASONS order), or None when it is kept."""
    if src_tokens == 0 or tgt_tokens == 0:
        return "empty"
    if src_tokens < settings.min_len or tgt_tokens < settings.min_len:
        return "too_short"
    if src_tokens > settings.max_len or tgt_tokens > settings.max_len:
        return "too_long"
    if src_tokens / tgt_tokens > settings.max_ratio or tgt_tokens / src_tokens > settings.max_ratio:
        return "ratio"
    return None


def filter_pairs(
    src_lines: list[str], tgt_lines: list[str], settings: FilterSettings
) -> tuple[list[int], dict]:
    """Return the indices of the kept pairs and {"input", "kept", "removed": {reason: n}}."""
    kept: list[int] = []
    removed = {reason: 0 for reason in REASONS}
    for index, (src, tgt) in enumerate(zip(src_lines, tgt_lines, strict=True)):
        reason = reason_to_drop(len(src.split()), len(tgt.split()), settings)
        if reason is None:
            kept.append(index)
        else:
            removed[reason] += 1
    stats = {"input": len(src_lines), "kept": len(kept), "removed": removed}
    return kept, stats


def describe(stats: dict) -> str:
    removed = ", ".join(f"{reason} {count}" for reason, count in stats["removed"].items())
    return f"kept {stats['kept']} of {stats['input']} training pairs (removed: {removed})"
