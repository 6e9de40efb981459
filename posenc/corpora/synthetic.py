"""The embedded synthetic translation task: an English-like source, a verb-final target.

Why: the main job must run with no network and still mean something. Translating this pair
needs long-range reordering (subject-object-verb order, postpositions, adjectives after the
noun, relative clauses before the noun), so a model without position information should lose
accuracy, while the small vocabulary keeps it learnable in about a minute on a CPU.

Source grammar (English-like, past tense, so no agreement):
    S      -> Clause (", and" Clause)* ("." | "!")
    Clause -> Subj VP
    Subj   -> NP | NP "and" NP
    NP     -> Name | Det Adj* Noun [PP] [Rel]      (PP only inside subjects: no attachment doubt)
    Rel    -> "that" VPsimple | "that" NPsimple Vt
    VP     -> Vt NPobj PP* | Vi PP*                 (no PPs after an object that has a Rel)
    PP     -> Prep NPsimple
Target (rule-based translation of the same tree):
    Clause -> Subj' "ga" PP'* NPobj' "wo" V'
    NP'    -> Rel' PP' Noun' Adj'(reversed) Det'    Rel' -> (body') V' "ru"
    PP'    -> NP' Postp'                            NP "and" NP -> NP' "to" NP'
    ", and" -> ", sosi"
Some source words map to two target words (one-to-many). Names are copied. Both sides start
with a capital and end with punctuation, so tokenization and detokenization are exercised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .errors import CorpusError

NOUNS = (
    "dog cat man woman child bird horse teacher doctor farmer king queen student girl boy friend "
    "baker singer soldier sailor house garden river table book car tree city village school "
    "forest mountain ship window door road bridge apple letter song picture ball box cup chair "
    "lake field flower hat coat key lamp bed wall market island station castle tower boat train "
    "bottle basket clock mirror piano horse_cart stone shell fish wolf fox bear mouse rabbit "
    "goat cow sheep duck owl"
).replace("horse_cart", "wagon").split()
NAMES = "John Mary Anna Peter Paul Maria Tom Lisa Paris London".split()
ADJECTIVES = (
    "big small old young red blue green happy sad tall short quiet loud kind clever brave "
    "lazy busy poor rich angry calm dark bright warm cold wet dry heavy light strong weak "
    "famous strange pretty ugly gentle proud wild tired"
).split()
TRANSITIVE = (
    "saw chased found liked helped took painted visited followed watched carried built "
    "bought sold opened closed cleaned pushed pulled caught called met loved hated fed washed "
    "drew kicked touched held"
).split()
INTRANSITIVE = "slept ran laughed waited danced sang smiled cried arrived jumped swam walked".split()
PREPOSITIONS = "in on near under behind with from beside above without".split()
DETERMINERS = ["the", "a", "this", "every", "some", "my", "our"]

# Target function words (fixed, so the test can find the case markers and verbs).
NOM, ACC, REL, NP_AND, CLAUSE_AND = "ga", "wo", "ru", "to", "sosi"

# The lexicon is built with a fixed seed, independent of the corpus seed: the language is the
# same for every corpus; the seed only changes which sentences are drawn.
_LEXICON_SEED = 20170101
_ONE_TO_MANY = 0.15  # share of content words translated by two target words


def _build_lexicon() -> dict[str, str]:
    rng = random.Random(_LEXICON_SEED)
    onsets = "b d f g h k l m n p r s t v z".split() + ["sh", "ch", "ts"]
    vowels = "a e i o u".split()
    codas = ["", "", "", "n", "r", "k"]
    taken = {NOM, ACC, REL, NP_AND, CLAUSE_AND}
    source_words = {w.lower() for w in NOUNS + ADJECTIVES + TRANSITIVE + INTRANSITIVE}
    source_words |= set(PREPOSITIONS) | set(DETERMINERS) | {"a", "an", "and", "that"}

    def fresh(syllables: int) -> str:
        while True:
            word = "".join(
                rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                for _ in range(syllables)
            )
            if word not in taken and word not in source_words:
                taken.add(word)
                return word

    lexicon: dict[str, str] = {}
    for word in DETERMINERS + PREPOSITIONS:
        lexicon[word] = fresh(1)
    for word in NOUNS + ADJECTIVES + TRANSITIVE + INTRANSITIVE:
        target = fresh(rng.choice((2, 2, 3)))
        if rng.random() < _ONE_TO_MANY:
            target += " " + fresh(1)
        lexicon[word] = target
    lexicon["an"] = lexicon["a"]
    return lexicon


LEXICON = _build_lexicon()
#: target words that translate a verb (the test of reordering looks for them)
TARGET_VERB_WORDS = frozenset(
    w for v in TRANSITIVE + INTRANSITIVE for w in LEXICON[v].split()
)
SOURCE_VERBS = frozenset(TRANSITIVE + INTRANSITIVE)


@dataclass(frozen=True)
class GeneratorConfig:
    """Sizes and shape of the synthetic corpus (the `data.generator` node)."""

    seed: int = 1234
    train: int = 15000
    valid: int = 500
    test: int = 500
    test_long: int = 500
    min_words: int = 4
    max_words: int = 16
    long_min_words: int = 24  # test_long: longer than any training sentence ...
    long_max_words: int = 32  # ... but far below the models' max_positions
    p_adjective: float = 0.35
    p_pp: float = 0.3
    p_relative: float = 0.2
    p_coordination: float = 0.15

    def check(self) -> None:
        for key in ("train", "valid", "test", "test_long"):
            if getattr(self, key) < 0:
                raise CorpusError(f"data.generator.{key}={getattr(self, key)}: must be >= 0")
        if self.train == 0 or self.valid == 0 or self.test == 0:
            raise CorpusError("data.generator: train, valid and test must each be at least 1")
        if not 3 <= self.min_words <= self.max_words:
            raise CorpusError(
                f"data.generator: need 3 <= min_words ({self.min_words}) <= max_words "
                f"({self.max_words})"
            )
        if not self.max_words < self.long_min_words <= self.long_max_words:
            raise CorpusError(
                f"data.generator: need max_words ({self.max_words}) < long_min_words "
                f"({self.long_min_words}) <= long_max_words ({self.long_max_words})"
            )
        for key in ("p_adjective", "p_pp", "p_relative", "p_coordination"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise CorpusError(f"data.generator.{key}={getattr(self, key)}: must be in [0, 1)")


class _Grammar:
    """Draws sentence trees and renders them on both sides."""

    def __init__(self, rng: random.Random, cfg: GeneratorConfig, richness: float = 1.0):
        self.rng = rng
        self.p_adj = min(0.8, cfg.p_adjective * richness)
        self.p_pp = min(0.8, cfg.p_pp * richness)
        self.p_rel = min(0.8, cfg.p_relative * richness)
        self.p_coord = min(0.9, cfg.p_coordination * richness)

    # -- trees ---------------------------------------------------------------------------
    def simple_np(self):
        rng = self.rng
        if rng.random() < 0.12:
            return ("name", rng.choice(NAMES))
        adjectives = []
        while len(adjectives) < 2 and rng.random() < self.p_adj:
            adjectives.append(rng.choice(ADJECTIVES))
        return ("np", rng.choice(DETERMINERS), adjectives, rng.choice(NOUNS), None, None)

    def full_np(self, allow_pp: bool):
        np = self.simple_np()
        if np[0] == "name":
            return np
        pp = self.pp() if allow_pp and self.rng.random() < self.p_pp else None
        rel = self.rel() if self.rng.random() < self.p_rel else None
        return ("np", np[1], np[2], np[3], pp, rel)

    def pp(self):
        return (self.rng.choice(PREPOSITIONS), self.simple_np())

    def rel(self):
        if self.rng.random() < 0.5:
            return ("rel_subj", self.vp(simple=True))
        return ("rel_obj", self.simple_np(), self.rng.choice(TRANSITIVE))

    def vp(self, simple: bool):
        rng = self.rng
        if rng.random() < 0.7:
            obj = self.simple_np() if simple else self.full_np(allow_pp=False)
            has_rel = obj[0] == "np" and obj[5] is not None
            pps = [] if has_rel else self.pps(1 if simple else 2)
            return ("vt", rng.choice(TRANSITIVE), obj, pps)
        return ("vi", rng.choice(INTRANSITIVE), self.pps(1 if simple else 2))

    def pps(self, limit: int):
        out = []
        while len(out) < limit and self.rng.random() < self.p_pp:
            out.append(self.pp())
        return out

    def subject(self):
        if self.rng.random() < self.p_coord:
            return ("and", self.simple_np(), self.simple_np())
        return self.full_np(allow_pp=True)

    def sentence(self, max_clauses: int):
        clauses = [(self.subject(), self.vp(simple=False))]
        while len(clauses) < max_clauses and self.rng.random() < self.p_coord:
            clauses.append((self.subject(), self.vp(simple=False)))
        end = "!" if self.rng.random() < 0.1 else "."
        return clauses, end

    # -- source rendering ----------------------------------------------------------------
    def src_np(self, np) -> list[str]:
        if np[0] == "name":
            return [np[1]]
        if np[0] == "and":
            return self.src_np(np[1]) + ["and"] + self.src_np(np[2])
        _, det, adjectives, noun, pp, rel = np
        if det == "a" and (adjectives or [noun])[0][0] in "aeiou":
            det = "an"
        words = [det, *adjectives, noun]
        if pp:
            words += self.src_pp(pp)
        if rel:
            words += ["that"] + self.src_rel(rel)
        return words

    def src_pp(self, pp) -> list[str]:
        return [pp[0]] + self.src_np(pp[1])

    def src_rel(self, rel) -> list[str]:
        if rel[0] == "rel_subj":
            return self.src_vp(rel[1])
        return self.src_np(rel[1]) + [rel[2]]

    def src_vp(self, vp) -> list[str]:
        if vp[0] == "vt":
            words = [vp[1]] + self.src_np(vp[2])
            pps = vp[3]
        else:
            words, pps = [vp[1]], vp[2]
        for pp in pps:
            words += self.src_pp(pp)
        return words

    # -- target rendering ----------------------------------------------------------------
    def tgt_np(self, np, case: str | None) -> list[str]:
        if np[0] == "name":
            words = [np[1]]
        elif np[0] == "and":
            words = self.tgt_np(np[1], None) + [NP_AND] + self.tgt_np(np[2], None)
        else:
            _, det, adjectives, noun, pp, rel = np
            words = []
            if rel:
                words += self.tgt_rel(rel)
            if pp:
                words += self.tgt_pp(pp)
            words += LEXICON[noun].split()
            for adjective in reversed(adjectives):
                words += LEXICON[adjective].split()
            words += LEXICON[det].split()
        return words + ([case] if case else [])

    def tgt_pp(self, pp) -> list[str]:
        return self.tgt_np(pp[1], None) + LEXICON[pp[0]].split()

    def tgt_rel(self, rel) -> list[str]:
        if rel[0] == "rel_subj":
            return self.tgt_vp(rel[1]) + [REL]
        return self.tgt_np(rel[1], NOM) + LEXICON[rel[2]].split() + [REL]

    def tgt_vp(self, vp) -> list[str]:
        words: list[str] = []
        pps = vp[3] if vp[0] == "vt" else vp[2]
        for pp in pps:
            words += self.tgt_pp(pp)
        if vp[0] == "vt":
            words += self.tgt_np(vp[2], ACC)
        return words + LEXICON[vp[1]].split()

    # -- sentences -----------------------------------------------------------------------
    def render(self, tree) -> tuple[str, str, int]:
        clauses, end = tree
        src_clauses = [self.src_np(subj) + self.src_vp(vp) for subj, vp in clauses]
        tgt_clauses = [self.tgt_np(subj, NOM) + self.tgt_vp(vp) for subj, vp in clauses]
        src = _join_clauses(src_clauses, "and", end)
        tgt = _join_clauses(tgt_clauses, CLAUSE_AND, end)
        return src, tgt, len(src.split())


def _join_clauses(clauses: list[list[str]], conjunction: str, end: str) -> str:
    # "A, and B." : the comma is attached to the previous word, as in written text.
    pieces = [" ".join(clauses[0])]
    for clause in clauses[1:]:
        pieces.append(f", {conjunction} " + " ".join(clause))
    text = "".join(pieces) + end
    return text[0].upper() + text[1:]


def generate(cfg: GeneratorConfig) -> dict[str, tuple[list[str], list[str]]]:
    """Return {split: (source_lines, target_lines)} for train, valid, test and test_long.

    Deterministic for a given config. No source sentence occurs in two splits, nor twice in
    one. test_long sentences have more words than any training sentence on both sides.
    """
    cfg.check()
    rng = random.Random(cfg.seed)
    seen: set[str] = set()
    normal = _Grammar(rng, cfg)

    def draw(grammar, count, accept, max_clauses, split):
        src_lines, tgt_lines = [], []
        attempts, limit = 0, 200 * count + 10000
        while len(src_lines) < count:
            attempts += 1
            if attempts > limit:
                raise CorpusError(
                    f"data.generator: could only draw {len(src_lines)} of {count} distinct "
                    f"{split} sentences with these lengths; lower the size or widen the lengths"
                )
            src, tgt, n_words = grammar.render(grammar.sentence(max_clauses))
            if src in seen or not accept(src, tgt, n_words):
                continue
            seen.add(src)
            src_lines.append(src)
            tgt_lines.append(tgt)
        return src_lines, tgt_lines

    def in_range(_src, _tgt, n):
        return cfg.min_words <= n <= cfg.max_words

    # Evaluation sets first, so changing the training size never changes them.
    splits = {
        "test": draw(normal, cfg.test, in_range, 2, "test"),
        "valid": draw(normal, cfg.valid, in_range, 2, "valid"),
        "train": draw(normal, cfg.train, in_range, 2, "train"),
    }
    if cfg.test_long:
        train_src_max = max(len(s.split()) for s in splits["train"][0])
        train_tgt_max = max(len(t.split()) for t in splits["train"][1])

        def is_long(src, tgt, n):
            return (
                cfg.long_min_words <= n <= cfg.long_max_words
                and len(src.split()) > train_src_max
                and len(tgt.split()) > train_tgt_max
            )

        rich = _Grammar(rng, cfg, richness=2.0)
        splits["test_long"] = draw(rich, cfg.test_long, is_long, 4, "test_long")
    return splits
