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

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
DEFAULT_RESAMPLES = {"bs": 1000, "ar": 10000}   # sacreBLEU's own defaults


def bleu_options(signature: str) -> dict:
    """The ``BLEU(...)`` arguments that reproduce a sacreBLEU signature such as
    ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``, so a cell is tested with the
    metric it was scored with."""
    fields = dict(part.split(":", 1) for part in signature.split("|") if ":" in part)
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
    """One sacreBLEU BLEU per reference set and options, its references preprocessed once."""

    def __init__(self):
        self._metrics = {}

    def sentence_stats(self, hypotheses, references, options: dict, references_key) -> list:
        """BLEU's sufficient statistics, one list per sentence (hypothesis and reference length,
        n-gram matches and totals): any subset's BLEU is ``corpus_bleu`` of their sum."""
        key = (references_key, tuple(sorted(options.items())))
        if key not in self._metrics:
            self._metrics[key] = BLEU(references=[references], **options)
        return self._metrics[key]._extract_corpus_statistics(hypotheses, None)


def corpus_bleu(summed_stats, options: dict) -> float:
    """BLEU of summed sufficient statistics (sacreBLEU's own formula)."""
    return BLEU(**options)._compute_score_from_stats(list(summed_stats)).score


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
