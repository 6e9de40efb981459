"""Paired significance tests on system outputs, with sacreBLEU's own code (``sacrebleu.significance``,
the same ``PairedTest`` as its CLI's ``--paired-bs`` / ``--paired-ar``), and the per-sentence
sufficient statistics that the tests and the length buckets sum.

Each output's statistics are extracted once (tokenizing and counting n-grams is most of the
cost) and handed to ``PairedTest`` through a BLEU that returns them instead of extracting them
again; the resampling, the scores and the p-values are sacreBLEU's. A test checks that the
p-values equal those of the ``sacrebleu`` command line on the same files."""

import logging
from contextlib import contextmanager
from dataclasses import dataclass

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest, _bootstrap_resample

# The private pieces used here (``_bootstrap_resample``, ``_extract_corpus_statistics``,
# ``_compute_score_from_stats``, ``Score._mean/_ci``) have no public equivalent: sacreBLEU has no
# per-sentence statistics API. pyproject.toml pins the version they were tested with, and
# tests/test_report_significance.py fails, naming it, on any other.
TESTED_SACREBLEU = "2.6.0"
# chrF++ (Popovic 2017): character 6-grams and word 1-2-grams, sacreBLEU's ``-m chrf --chrf-word-order 2``.
CHRF_WORD_ORDER = 2

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
DEFAULT_RESAMPLES = {"bs": 1000, "ar": 10000}   # sacreBLEU's own defaults


def chrf_options(signature: str) -> dict:
    """The ``CHRF(...)`` arguments that reproduce a chrF signature such as
    ``nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0``; an empty one gives chrF++."""
    fields = dict(part.split(":", 1) for part in signature.split("|") if ":" in part)
    options = {"char_order": int(fields.get("nc", CHRF.CHAR_ORDER)),
               "word_order": int(fields.get("nw", CHRF_WORD_ORDER))}
    if fields.get("case") == "lc":
        options["lowercase"] = True
    if fields.get("space") == "yes":
        options["whitespace"] = True
    if fields.get("eff") == "no":
        options["eps_smoothing"] = True
    return options


def chrf_metric(lowercase: bool = False, references=None) -> CHRF:
    """The chrF++ every cell is scored with."""
    return CHRF(word_order=CHRF_WORD_ORDER, lowercase=lowercase, references=references)


METRICS = {"bleu": BLEU, "chrf": CHRF}


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


class Scorer:
    """One sacreBLEU metric per reference set and options, its references preprocessed once."""

    def __init__(self):
        self._metrics = {}

    def sentence_stats(self, hypotheses, references, options: dict, references_key, metric: str = "bleu") -> list:
        """The metric's sufficient statistics, one list per sentence (BLEU: hypothesis and
        reference length, n-gram matches and totals; chrF: hypothesis, reference and matching
        n-grams per order): any subset's score is that of their sum."""
        key = (metric, references_key, tuple(sorted(options.items())))
        if key not in self._metrics:
            self._metrics[key] = METRICS[metric](references=[references], **options)
        return self._metrics[key]._extract_corpus_statistics(hypotheses, None)


def corpus_bleu(summed_stats, options: dict) -> float:
    """BLEU of summed sufficient statistics (sacreBLEU's own formula)."""
    return BLEU(**options)._compute_score_from_stats(list(summed_stats)).score


def corpus_score(summed_stats, options: dict, metric: str = "bleu") -> float:
    """The metric's score of summed sufficient statistics (sacreBLEU's own formula)."""
    return METRICS[metric](**options)._compute_score_from_stats(list(summed_stats)).score


def sacrebleu_version_problem() -> str:
    """Why this sacreBLEU may not be the one the private pieces above were tested with, or ""."""
    if sacrebleu.__version__ != TESTED_SACREBLEU:
        return (f"sacreBLEU {sacrebleu.__version__} is installed; posenc's report uses its private per-sentence "
                f"statistics, tested with sacreBLEU {TESTED_SACREBLEU} only (pyproject.toml pins it)")
    return ""


class _KnownStatsBLEU(BLEU):
    """sacreBLEU's BLEU that returns the statistics already extracted for each hypothesis list
    (by identity) instead of extracting them again. Single reference, as every cell here."""

    def __init__(self, known: dict, **options):
        super().__init__(**options)
        self._known = known
        self.num_refs = 1

    def _extract_corpus_statistics(self, hypotheses, references):
        return self._known[id(hypotheses)]


@dataclass(frozen=True)
class TestResult:
    score: float      # the system's BLEU on the (concatenated) outputs
    p_value: float    # two-sided, against the baseline


def paired_test(baseline, systems: dict, options: dict, test: str = "bs", resamples: int = 0):
    """Test each system against the baseline with sacreBLEU's ``PairedTest``. ``baseline`` and
    each value of ``systems`` (name -> ...) are ``(hypotheses, statistics)`` on the same
    references. Returns ``(baseline BLEU, {name: TestResult}, signature)``; the signature names
    the test, the resamples and sacreBLEU's seed (``SACREBLEU_SEED``, default 12345).

    A system whose statistics equal the baseline's sentence for sentence gets p = 1: there is no
    difference to test. (sacreBLEU counts resamples *strictly* above the observed difference, so
    a zero difference that every resample repeats would get 1/(n+1) and look significant.)"""
    if test not in TESTS:
        raise ValueError(f"test {test!r} is not allowed; allowed: {', '.join(TESTS)}")
    metric = _KnownStatsBLEU({id(baseline[0]): baseline[1]}, **options)
    base_score = metric._aggregate_and_compute(baseline[1]).score
    tested = {name: TestResult(base_score, 1.0) for name, (_, stats) in systems.items() if stats == baseline[1]}
    differing = {name: pair for name, pair in systems.items() if name not in tested}
    if not differing:
        return base_score, tested, ""
    named = [("baseline", baseline[0])] + [(name, hyps) for name, (hyps, _) in differing.items()]
    metric._known.update({id(hyps): stats for hyps, stats in differing.values()})
    with _quiet_sacrebleu():
        signatures, scores = PairedTest(named, {"BLEU": metric}, references=None, test_type=test,
                                        n_samples=resamples)()
    results = scores["BLEU"]
    tested.update({name: TestResult(r.score, r.p_value) for (name, _), r in zip(named[1:], results[1:])})
    return results[0].score, tested, signatures["BLEU"].format()


def bootstrap_ci(stats, options: dict, resamples: int):
    """sacreBLEU's bootstrap 95% interval of one output's BLEU, ``(low, high)``: what its
    ``corpus_score(n_bootstrap=...)`` computes, from statistics already extracted. For a row with
    one seed, where seeds give no spread."""
    metric = BLEU(**options)
    _, resampled = _bootstrap_resample(stats, metric, resamples)
    score = metric._aggregate_and_compute(stats)
    score.estimate_ci(resampled)
    return score._mean - score._ci, score._mean + score._ci
