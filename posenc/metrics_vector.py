"""BLEU and chrF++ of many summed sufficient statistics at once (numpy), for the resampling tests.

sacreBLEU scores one statistics vector per call (``_compute_score_from_stats``); a bootstrap over
seeds and sentences needs thousands per row. These are the same formulas, vectorized over the
leading axes; a test checks them against sacreBLEU's own on random statistics and every option.
Beside ``posenc.metrics``, the other module of ``posenc/`` that imports sacreBLEU (for its constants),
inside the functions that score: the statistics (``posenc.stats.verdict``) import this module, and
a module that only plans with them (``posenc.harness.sweep.config``) does not pay for sacreBLEU
(``tests/test_metrics.py``).
"""

import numpy as np

# sacreBLEU's BLEU statistics: [hypothesis length, reference length, matches 1..4, totals 1..4]
# (sacreBLEU's MAX_NGRAM_ORDER orders).
_NO_LOG = -9999999999.0   # sacreBLEU's my_log(0)


def bleu(stats, options: dict) -> np.ndarray:
    """BLEU of each row (last axis: a sentence's or a corpus's summed statistics), with the
    ``BLEU(...)`` options a record was scored with (``posenc.cells.record.bleu_options``, as the harness
    recorded them from ``posenc.metrics.bleu_options``): smoothing, effective order."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.metrics.bleu import MAX_NGRAM_ORDER as ORDER

    s = np.asarray(stats, dtype=np.float64)
    sys_len, ref_len = s[..., 0], s[..., 1]
    correct, total = s[..., 2:2 + ORDER].copy(), s[..., 2 + ORDER:2 + 2 * ORDER].copy()
    any_match = (correct > 0).any(-1)
    method = options.get("smooth_method", "exp")
    value = options.get("smooth_value")
    value = BLEU.SMOOTH_DEFAULTS[method] if value is None else value
    if method == "add-k":
        correct[..., 1:] += value
        total[..., 1:] += value
    alive = np.cumprod(total > 0, axis=-1).astype(bool)   # sacreBLEU stops at the first empty order
    zero = (correct == 0) & alive
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = 100.0 * correct / total
        if method == "exp":
            smoothed = 100.0 / (2.0 ** np.cumsum(zero, axis=-1) * total)
        elif method == "floor":
            smoothed = 100.0 * value / total
        else:
            smoothed = np.zeros_like(total)
        precision = np.where(alive, np.where(zero, smoothed, plain), 0.0)
        logs = np.where(precision > 0, np.log(np.where(precision > 0, precision, 1.0)), _NO_LOG)
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / np.where(sys_len > 0, sys_len, 1)),
                                                  0.0), 1.0)
    if options.get("effective_order"):
        eff = alive.sum(-1)
        eff = np.where(eff > 0, eff, ORDER)
    else:
        eff = np.full(alive.shape[:-1], ORDER)
    used = np.arange(ORDER) < eff[..., None]
    score = bp * np.exp(np.where(used, logs, 0.0).sum(-1) / eff)
    return np.where(any_match, score, 0.0)


def chrf(stats, options: dict) -> np.ndarray:
    """chrF of each row (last axis: summed [hyp, ref, match] counts per order, characters first),
    sacreBLEU's ``CHRF._compute_f_score`` for its default beta and smoothing."""
    from sacrebleu.metrics import CHRF

    s = np.asarray(stats, dtype=np.float64)
    beta = options.get("beta", CHRF.BETA)
    if options.get("eps_smoothing"):
        raise ValueError("chrF with eps_smoothing is not vectorized")
    hyp, ref, match = s[..., 0::3], s[..., 1::3], s[..., 2::3]
    factor = beta ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(hyp > 0, match / np.where(hyp > 0, hyp, 1), 1e-16)
        rec = np.where(ref > 0, match / np.where(ref > 0, ref, 1), 1e-16)
    counted = (hyp > 0) & (ref > 0)
    n = counted.sum(-1)
    avg_prec = np.where(counted, prec, 0.0).sum(-1) / np.where(n > 0, n, 1)
    avg_rec = np.where(counted, rec, 0.0).sum(-1) / np.where(n > 0, n, 1)
    denom = factor * avg_prec + avg_rec
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 100 * (1 + factor) * avg_prec * avg_rec / np.where(denom > 0, denom, 1)
    return np.where((n > 0) & (avg_prec + avg_rec > 0), score, 0.0)


SCORERS = {"bleu": bleu, "chrf": chrf}
