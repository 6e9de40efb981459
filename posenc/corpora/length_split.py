"""A length split of any corpus, for length extrapolation on real text.

Train and valid keep the pairs of at most L source tokens (``by="both"``: on both sides); the
longer pairs of both (``by="both"``: longer on both sides), never seen in training, become the
``test_long`` split: the same shape as the synthetic corpus's long split, so the harness scores it
(``generation.test_long=true``) and the report reads it unchanged. The ordinary test set stays
whole, as everywhere. Tokens are the ones ``data.filter`` counts: the corpus's own Moses tokens,
before subwords, so the split never depends on the learnt subwords.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import CorpusError

MIN_LONG_PAIRS = 500  # a long split big enough to score and compare (issue 31)
POOL = ("train", "valid")  # the splits whose long pairs are held out
SIDES = {"source": "source tokens", "both": "tokens on both sides"}  # data.length_split_by -> what L counts

Pairs = dict[str, tuple[list[str], list[str]]]  # split -> (source lines, target lines)


@dataclass(frozen=True)
class LengthSplit:
    max_tokens: int  # L: the longest sentence, in tokens, that train and valid keep
    test_long_size: int | None = None  # at most this many long pairs, evenly spaced; None: all
    by: str = "source"  # a key of SIDES: which sides L bounds in training and exceeds in test_long

    def as_dict(self) -> dict:
        return asdict(self)


def parse_length_split(length_split, test_long_size, by) -> LengthSplit | None:
    """``data.length_split``, ``data.test_long_size`` and ``data.length_split_by`` -> the settings,
    or None (no split)."""
    by = "source" if by is None else by
    if by not in SIDES:
        raise CorpusError(f"data.length_split_by={by!r}: allowed values are {', '.join(SIDES)}")
    if length_split is None:
        if test_long_size is not None:
            raise CorpusError(f"data.test_long_size={test_long_size!r} needs data.length_split=L "
                              "(the longest source, in tokens, that train and valid keep)")
        return None
    max_tokens = _whole("data.length_split", length_split, 1,
                        "the longest source, in tokens, that train and valid keep; null: no length split")
    size = None if test_long_size is None else _whole(
        "data.test_long_size", test_long_size, MIN_LONG_PAIRS, "null: every long pair")
    return LengthSplit(max_tokens, size, by)


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
    """Move the pairs of train and valid longer than L into ``test_long``; drop the ones that are
    neither (``by="both"``: one side up to L, the other beyond).

    ``raw`` and ``tok`` hold the same pairs as given and as tokenized (train already filtered);
    both come back split alike, with the split's counts for the manifest. A value that cannot
    give a long split of MIN_LONG_PAIRS pairs and a non-empty train and valid is refused in one
    line that names the values this corpus allows.
    """
    lengths = {split: [tuple(len(line.split()) for line in side) for side in tok[split]]
               for split in (*POOL, "test")}
    # a pair's (shortest, longest) measured side: kept while the longest is <= L, long once the shortest is > L
    span = {split: [(s, s) if settings.by == "source" else (min(s, t), max(s, t)) for s, t in zip(*sides)]
            for split, sides in lengths.items()}
    limit = settings.max_tokens
    _check_limit(limit, span, name, SIDES[settings.by])

    held = [(split, i) for split in POOL for i, (low, _) in enumerate(span[split]) if low > limit]
    size = len(held) if settings.test_long_size is None else min(settings.test_long_size, len(held))
    chosen = [held[(i * len(held)) // size] for i in range(size)]  # evenly spaced, in corpus order
    kept = {split: [(split, i) for i, (_, high) in enumerate(span[split]) if high <= limit] for split in POOL}

    new_raw, new_tok = dict(raw), dict(tok)
    for split, picks in [*kept.items(), ("test_long", chosen)]:
        new_raw[split], new_tok[split] = _take(raw, picks), _take(tok, picks)

    def side(picks, which):
        return [lengths[split][which][i] for split, i in picks]

    train_tgt_max = max(side(kept["train"], 1))
    stats = {
        **settings.as_dict(),
        "train_max_source_tokens": max(side(kept["train"], 0)),
        "train_max_target_tokens": train_tgt_max,
        "test_long_min_source_tokens": min(side(chosen, 0)),
        "test_long_max_source_tokens": max(side(chosen, 0)),
        "test_long_min_target_tokens": min(side(chosen, 1)),
        "long_pairs": len(held),
        "test_long": size,
        "test_long_from": {split: sum(1 for s, _ in chosen if s == split) for split in POOL},
        # by source: how many long pairs are longer than every training pair on the target side too
        "test_long_target_longer": sum(1 for n in side(chosen, 1) if n > train_tgt_max),
        "dropped": {split: len(span[split]) - len(kept[split]) - sum(1 for s, _ in held if s == split)
                    for split in POOL},
        # the ordinary test set stays whole: its pairs beyond L are beyond the training lengths too
        "test_longer_than_split": sum(1 for low, _ in span["test"] if low > limit),
    }
    return new_raw, new_tok, stats


def allowed_limits(span: dict[str, list[tuple[int, int]]]) -> tuple[int, int | None]:
    """The smallest L that keeps a train and a valid pair, and the largest that leaves
    MIN_LONG_PAIRS longer pairs (None when the corpus has too few pairs for any)."""
    least = max(min(high for _, high in span[split]) for split in POOL)
    pool = sorted((low for split in POOL for low, _ in span[split]), reverse=True)
    most = pool[MIN_LONG_PAIRS - 1] - 1 if len(pool) >= MIN_LONG_PAIRS else None
    return least, most


def _check_limit(limit: int, span, name: str, unit: str) -> None:
    least, most = allowed_limits(span)
    if most is None or least > most:
        allowed = (f"no value works for {name}: it has no {MIN_LONG_PAIRS} train and valid pairs longer than "
                   f"{least} {unit}, the least that keeps a train and a valid pair")
    else:
        allowed = f"allowed for {name}: {least} to {most}"
    longer = sum(1 for split in POOL for low, _ in span[split] if low > limit)
    if longer < MIN_LONG_PAIRS:
        raise CorpusError(f"data.length_split={limit} leaves {longer} train and valid pairs longer than {limit} "
                          f"{unit}, and test_long needs at least {MIN_LONG_PAIRS}; {allowed}")
    for split in POOL:
        if not any(high <= limit for _, high in span[split]):
            raise CorpusError(f"data.length_split={limit} keeps no {split} pair (its shortest has "
                              f"{min(high for _, high in span[split])} {unit}); {allowed}")


def _take(pairs: Pairs, picks) -> tuple[list[str], list[str]]:
    """The picked pairs, ``(split, index)`` in order, as (source lines, target lines)."""
    return tuple([pairs[split][side][i] for split, i in picks] for side in (0, 1))
