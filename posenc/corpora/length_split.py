"""A length split of any corpus, for length extrapolation on real text.

Train and valid keep the pairs of at most L source tokens; the longer pairs of both, never seen in
training, become the ``test_long`` split: the same shape as the synthetic corpus's long split, so
the harness scores it (``generation.test_long=true``) and the report reads it unchanged. The
ordinary test set stays whole, as everywhere. Tokens are the ones ``data.filter`` counts: the
corpus's own Moses tokens, before subwords, so the split never depends on the learnt subwords.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import CorpusError

MIN_LONG_PAIRS = 500  # a long split big enough to score and compare (issue 31)
POOL = ("train", "valid")  # the splits whose long pairs are held out

Pairs = dict[str, tuple[list[str], list[str]]]  # split -> (source lines, target lines)


@dataclass(frozen=True)
class LengthSplit:
    max_tokens: int  # L: the longest source, in tokens, that train and valid keep
    test_long_size: int | None = None  # at most this many long pairs, evenly spaced; None: all

    def as_dict(self) -> dict:
        return asdict(self)


def parse_length_split(length_split, test_long_size) -> LengthSplit | None:
    """``data.length_split`` and ``data.test_long_size`` -> the settings, or None (no split)."""
    if length_split is None:
        if test_long_size is not None:
            raise CorpusError(f"data.test_long_size={test_long_size!r} needs data.length_split=L "
                              "(the longest source, in tokens, that train and valid keep)")
        return None
    max_tokens = _whole("data.length_split", length_split, 1,
                        "the longest source, in tokens, that train and valid keep; null: no length split")
    size = None if test_long_size is None else _whole(
        "data.test_long_size", test_long_size, MIN_LONG_PAIRS, "null: every long pair")
    return LengthSplit(max_tokens, size)


def _whole(key: str, value, least: int, meaning: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        number = None
    else:
        try:
            number = int(value)
        except ValueError:
            number = None
    if number is None or number < least:
        raise CorpusError(f"{key}={value!r}: must be a whole number >= {least} ({meaning})")
    return number


def split_by_length(settings: LengthSplit, raw: Pairs, tok: Pairs, name: str) -> tuple[Pairs, Pairs, dict]:
    """Move the pairs of train and valid longer than L source tokens into ``test_long``.

    ``raw`` and ``tok`` hold the same pairs as given and as tokenized (train already filtered);
    both come back split alike, with the split's counts for the manifest. A value that cannot
    give a long split of MIN_LONG_PAIRS pairs and a non-empty train and valid is refused in one
    line that names the values this corpus allows.
    """
    lengths = {split: [len(line.split()) for line in tok[split][0]] for split in (*POOL, "test")}
    limit = settings.max_tokens
    _check_limit(limit, lengths, name)

    held = [(split, i) for split in POOL for i, n in enumerate(lengths[split]) if n > limit]
    size = len(held) if settings.test_long_size is None else min(settings.test_long_size, len(held))
    chosen = [held[(i * len(held)) // size] for i in range(size)]  # evenly spaced, in corpus order

    new_raw, new_tok = dict(raw), dict(tok)
    for split in POOL:
        keep = [i for i, n in enumerate(lengths[split]) if n <= limit]
        new_raw[split] = _take(raw, [(split, i) for i in keep])
        new_tok[split] = _take(tok, [(split, i) for i in keep])
    new_raw["test_long"] = _take(raw, chosen)
    new_tok["test_long"] = _take(tok, chosen)

    train_tgt_max = max(len(line.split()) for line in new_tok["train"][1])
    stats = {
        **settings.as_dict(),
        "train_max_source_tokens": max(n for n in lengths["train"] if n <= limit),
        "test_long_min_source_tokens": min(lengths[split][i] for split, i in chosen),
        "test_long_max_source_tokens": max(lengths[split][i] for split, i in chosen),
        "long_pairs": len(held),
        "test_long": size,
        "test_long_from": {split: sum(1 for s, _ in chosen if s == split) for split in POOL},
        # the split is by source length; how many long pairs are longer on the target side too
        "test_long_target_longer": sum(1 for line in new_tok["test_long"][1] if len(line.split()) > train_tgt_max),
        "train_max_target_tokens": train_tgt_max,
        # the ordinary test set stays whole: its pairs beyond L are beyond every training length too
        "test_longer_than_split": sum(1 for n in lengths["test"] if n > limit),
    }
    return new_raw, new_tok, stats


def allowed_limits(lengths: dict[str, list[int]]) -> tuple[int, int | None]:
    """The smallest L that keeps a train and a valid pair, and the largest that leaves
    MIN_LONG_PAIRS longer pairs (None when the corpus has too few pairs for any)."""
    least = max(min(lengths[split]) for split in POOL)
    pool = sorted((n for split in POOL for n in lengths[split]), reverse=True)
    most = pool[MIN_LONG_PAIRS - 1] - 1 if len(pool) >= MIN_LONG_PAIRS else None
    return least, most


def _check_limit(limit: int, lengths: dict[str, list[int]], name: str) -> None:
    least, most = allowed_limits(lengths)
    if most is None or least > most:
        allowed = (f"no value works for {name}: it has no {MIN_LONG_PAIRS} train and valid pairs longer than "
                   f"{least} source tokens, the least that keeps a train and a valid pair")
    else:
        allowed = f"allowed for {name}: {least} to {most}"
    longer = sum(1 for split in POOL for n in lengths[split] if n > limit)
    if longer < MIN_LONG_PAIRS:
        raise CorpusError(f"data.length_split={limit} leaves {longer} train and valid pairs longer than {limit} "
                          f"source tokens, and test_long needs at least {MIN_LONG_PAIRS}; {allowed}")
    for split in POOL:
        if not any(n <= limit for n in lengths[split]):
            raise CorpusError(f"data.length_split={limit} keeps no {split} pair (its shortest source has "
                              f"{min(lengths[split])} tokens); {allowed}")


def _take(pairs: Pairs, picks) -> tuple[list[str], list[str]]:
    """The picked pairs, ``(split, index)`` in order, as (source lines, target lines)."""
    return tuple([pairs[split][side][i] for split, i in picks] for side in (0, 1))
