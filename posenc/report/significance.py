"""Paired significance tests on system outputs, with sacreBLEU's own code (``sacrebleu.significance``,
the same ``PairedTest`` as its CLI's ``--paired-bs`` / ``--paired-ar``), run through ``posenc.metrics``.

Each output's statistics are extracted once (tokenizing and counting n-grams is most of the
cost, ``posenc.metrics.Scorer``) and handed to ``PairedTest`` through a BLEU that returns them
instead of extracting them again; the resampling, the scores and the p-values are sacreBLEU's. A test checks that the
p-values equal those of the ``sacrebleu`` command line on the same files."""

from dataclasses import dataclass

from posenc.metrics import bleu_of_stats, sacrebleu_paired_test

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
DEFAULT_RESAMPLES = {"bs": 1000, "ar": 10000}   # sacreBLEU's own defaults


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
    base_score = bleu_of_stats(baseline[1], options)
    tested = {name: TestResult(base_score, 1.0) for name, (_, stats) in systems.items() if stats == baseline[1]}
    differing = {name: pair for name, pair in systems.items() if name not in tested}
    if not differing:
        return base_score, tested, ""
    named = [("baseline", *baseline)] + [(name, hyps, stats) for name, (hyps, stats) in differing.items()]
    results, signature = sacrebleu_paired_test(named, options, test, resamples)
    tested.update({name: TestResult(*r) for (name, _, _), r in zip(named[1:], results[1:])})
    return results[0][0], tested, signature
