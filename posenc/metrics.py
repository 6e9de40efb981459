"""The metrics, one home: BLEU as the two communities report it (sacreBLEU's 13a on detokenized
text, with its signature, and tokenized BLEU as Gehring et al. report it) and chrF++ on
detokenized text, each a ``Metric`` that holds its options as data and gives its signature, its
corpus score and its per-sentence sufficient statistics; the signature parsers that give old
records their options back; and the pieces of sacreBLEU the report's tests run on.

This is the one module of ``posenc/`` that imports sacreBLEU (``posenc.metrics_vector``, the same
formulas vectorized, beside it). It is a leaf: it imports nothing of ``posenc``; the harness
scores with it and the report reads with it.

The private pieces used here (``_bootstrap_resample``, ``_extract_corpus_statistics``,
``_compute_score_from_stats``, ``Score._mean/_ci``) have no public equivalent: sacreBLEU has no
per-sentence statistics API. pyproject.toml pins the version they were tested with, and
tests/test_report_verdict.py fails, naming it, on any other (``sacrebleu_version_problem``)."""

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample

TESTED_SACREBLEU = "2.6.0"
# Part of every statistics cache key: statistics extracted by another sacreBLEU are not reused.
SACREBLEU_VERSION = sacrebleu.__version__
# chrF++ (Popovic 2017): character 6-grams and word 1-2-grams, sacreBLEU's ``-m chrf --chrf-word-order 2``.
CHRF_WORD_ORDER = 2

SACREBLEU_METRICS = {"bleu": BLEU, "chrf": CHRF}


def sacrebleu_version_problem() -> str:
    """Why this sacreBLEU may not be the one the private pieces here were tested with, or ""."""
    if sacrebleu.__version__ != TESTED_SACREBLEU:
        return (f"sacreBLEU {sacrebleu.__version__} is installed; posenc's report uses its private per-sentence "
                f"statistics, tested with sacreBLEU {TESTED_SACREBLEU} only (pyproject.toml pins it)")
    return ""


# -- the metrics -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """One metric with its options as data: ``kind`` is sacreBLEU's metric ("bleu" or "chrf"),
    ``options`` its ``BLEU(...)`` / ``CHRF(...)`` arguments, as a record keeps them."""

    kind: str
    options: dict = field(default_factory=dict)

    def sacrebleu(self, references=None):
        """sacreBLEU's metric object (``references``: one list, preprocessed once, for many scorings)."""
        return SACREBLEU_METRICS[self.kind](references=None if references is None else [references], **self.options)

    def corpus_score(self, hypotheses, references):
        """``(score, signature)`` of the output against one reference per sentence."""
        metric = self.sacrebleu()
        score = metric.corpus_score(hypotheses, [references]).score
        return score, str(metric.get_signature())   # the signature needs a score (its nrefs)

    def sentence_stats(self, hypotheses, references) -> list:
        """The sufficient statistics, one list per sentence (BLEU: hypothesis and reference length,
        n-gram matches and totals; chrF: hypothesis, reference and matching n-grams per order): any
        subset's score is that of their sum."""
        return self.sacrebleu(references)._extract_corpus_statistics(hypotheses, None)

    def score_of_stats(self, summed_stats) -> float:
        """The score of summed sufficient statistics (sacreBLEU's own formula)."""
        return self.sacrebleu()._compute_score_from_stats(list(summed_stats)).score


def bleu_options(lowercase: bool = False) -> dict:
    """sacreBLEU's ``BLEU(...)`` arguments for raw text: 13a tokenization, exponential smoothing
    (its defaults, named so the record carries them as data)."""
    return {"tokenize": "13a", "smooth_method": "exp", **({"lowercase": True} if lowercase else {})}


def chrf_options(lowercase: bool = False) -> dict:
    """chrF++'s ``CHRF(...)`` arguments, named as ``chrf_signature_options`` reads them back from its
    signature (so a record's options and its signature's give one statistics cache key)."""
    return {"char_order": CHRF.CHAR_ORDER, "word_order": CHRF_WORD_ORDER, **({"lowercase": True} if lowercase else {})}


def bleu(lowercase: bool = False) -> Metric:
    """sacreBLEU 13a on detokenized text: the BLEU the tables and the verdicts use."""
    return Metric("bleu", bleu_options(lowercase))


def tokenized_bleu(lowercase: bool = False) -> Metric:
    """BLEU over already-tokenized text, split on whitespace only (``multi-bleu.perl`` style)."""
    return Metric("bleu", {"tokenize": "none", "lowercase": lowercase, "force": True})


# Appended to the signature of a BLEU computed on tokenized text (a data-bin scored against its own
# targets, data=binarized): sacreBLEU's signature says how it tokenized (tok:none), not what it was given.
TOKENIZED_TEXT = "text:tokenized"


def on_tokenized_text(signature) -> bool:
    """Whether a recorded BLEU signature is of a BLEU on tokenized text (``TOKENIZED_TEXT``)."""
    return TOKENIZED_TEXT in str(signature or "").split("|")


def bleu_on_tokenized(lowercase: bool = False) -> Metric:
    """sacreBLEU over text that is tokenized already, split on whitespace only (``tok:none``), smoothed as
    ``bleu``: the BLEU of a corpus whose only references are tokenized."""
    return Metric("bleu", {**bleu_options(lowercase), "tokenize": "none"})


def chrf(lowercase: bool = False) -> Metric:
    """chrF++ (sacreBLEU ``CHRF(word_order=2)``) on detokenized text."""
    return Metric("chrf", chrf_options(lowercase))


def _signature_fields(signature: str) -> dict:
    return dict(part.split(":", 1) for part in signature.split("|") if ":" in part)


def bleu_signature_options(signature: str) -> dict:
    """The ``BLEU(...)`` arguments that reproduce a sacreBLEU signature such as
    ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``."""
    fields = _signature_fields(signature)
    options = {}
    if fields.get("case") == "lc":
        options["lowercase"] = True
    if "tok" in fields:
        options["tokenize"] = fields["tok"]
    if fields.get("eff") == "yes":
        options["effective_order"] = True
    method, _, value = fields.get("smooth", "exp").partition("[")
    options["smooth_method"] = method
    if value:
        options["smooth_value"] = float(value.rstrip("]"))
    return options


def chrf_signature_options(signature: str) -> dict:
    """The ``CHRF(...)`` arguments that reproduce a chrF signature such as
    ``nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0``; an empty one gives chrF++."""
    fields = _signature_fields(signature)
    options = {"char_order": int(fields.get("nc", CHRF.CHAR_ORDER)),
               "word_order": int(fields.get("nw", CHRF_WORD_ORDER))}
    if fields.get("case") == "lc":
        options["lowercase"] = True
    if fields.get("space") == "yes":
        options["whitespace"] = True
    if fields.get("eff") == "no":
        options["eps_smoothing"] = True
    return options


# -- per-sentence statistics, summed ------------------------------------------------------------------

class Scorer:
    """One sacreBLEU metric per reference set and options, its references preprocessed once."""

    def __init__(self):
        self._metrics = {}

    def sentence_stats(self, hypotheses, references, options: dict, references_key, metric: str = "bleu") -> list:
        """``Metric.sentence_stats``, the references' preprocessing kept for the next output on them."""
        key = (metric, references_key, tuple(sorted(options.items())))
        if key not in self._metrics:
            self._metrics[key] = Metric(metric, dict(options)).sacrebleu(references)
        return self._metrics[key]._extract_corpus_statistics(hypotheses, None)


def corpus_bleu(summed_stats, options: dict) -> float:
    """BLEU of summed sufficient statistics (sacreBLEU's own formula)."""
    return Metric("bleu", options).score_of_stats(summed_stats)


def corpus_score(summed_stats, options: dict, metric: str = "bleu") -> float:
    """The metric's score of summed sufficient statistics (sacreBLEU's own formula)."""
    return Metric(metric, options).score_of_stats(summed_stats)


def bootstrap_ci(stats, options: dict, resamples: int):
    """sacreBLEU's bootstrap 95% interval of one output's BLEU, ``(low, high)``: what its
    ``corpus_score(n_bootstrap=...)`` computes, from statistics already extracted. For a row with
    one seed, where seeds give no spread."""
    metric = BLEU(**options)
    _, resampled = _bootstrap_resample(stats, metric, resamples)
    score = metric._aggregate_and_compute(stats)
    score.estimate_ci(resampled)
    return score._mean - score._ci, score._mean + score._ci


# -- sacreBLEU's paired tests ---------------------------------------------------------------------------

@contextmanager
def _quiet_sacrebleu():
    """sacreBLEU logs each step of a test at INFO, which a Hydra sweep prints; hush it for the
    duration of the test only, then put the level back."""
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class _KnownStatsBLEU(BLEU):
    """sacreBLEU's BLEU that returns the statistics already extracted for each hypothesis list
    (by identity) instead of extracting them again. Single reference, as every cell here."""

    def __init__(self, known: dict, **options):
        super().__init__(**options)
        self._known = known
        self.num_refs = 1

    def _extract_corpus_statistics(self, hypotheses, references):
        return self._known[id(hypotheses)]


def bleu_of_stats(stats, options: dict) -> float:
    """BLEU of one output's per-sentence statistics, aggregated as ``PairedTest`` aggregates them."""
    return _KnownStatsBLEU({}, **options)._aggregate_and_compute(stats).score


def sacrebleu_paired_test(named: list, options: dict, test: str, resamples: int):
    """sacreBLEU's ``PairedTest`` (``--paired-bs`` / ``--paired-ar``) of BLEU on outputs whose
    statistics are already extracted: ``named`` is ``[(name, hypotheses, statistics), ...]``, the
    baseline first. Returns ``([(score, p_value), ...] in that order, the test's signature)``."""
    metric = _KnownStatsBLEU({id(hyps): stats for _, hyps, stats in named}, **options)
    with _quiet_sacrebleu():
        signatures, scores = PairedTest([(name, hyps) for name, hyps, _ in named], {"BLEU": metric},
                                        references=None, test_type=test, n_samples=resamples)()
    return [(r.score, r.p_value) for r in scores["BLEU"]], signatures["BLEU"].format()
