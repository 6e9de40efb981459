"""BLEU as the two communities report it: sacreBLEU on detokenized text (with its signature) and
tokenized BLEU (what Gehring et al. report), both through sacreBLEU's metric objects; and chrF++
on detokenized text."""

from sacrebleu.metrics import BLEU

from posenc.report.significance import chrf_metric


def detokenized_bleu_options(lowercase=False) -> dict:
    """sacreBLEU's ``BLEU(...)`` arguments for raw text: 13a tokenization, exponential smoothing
    (its defaults, named so the record carries them as data)."""
    return {"tokenize": "13a", "smooth_method": "exp", **({"lowercase": True} if lowercase else {})}


def detokenized_bleu(hypotheses, references, lowercase=False):
    """sacreBLEU 13a on raw text: ``(score, signature, the BLEU(...) arguments)``."""
    options = detokenized_bleu_options(lowercase)
    metric = BLEU(**options)
    return metric.corpus_score(hypotheses, [references]).score, str(metric.get_signature()), options


def tokenized_bleu(hypotheses, references, lowercase=False) -> float:
    """BLEU over already-tokenized text, split on whitespace only (``multi-bleu.perl`` style)."""
    metric = BLEU(tokenize="none", lowercase=lowercase, force=True)
    return metric.corpus_score(hypotheses, [references]).score


def detokenized_chrf(hypotheses, references, lowercase=False):
    """chrF++ (sacreBLEU ``CHRF(word_order=2)``) on raw text: ``(score, signature)``."""
    metric = chrf_metric(lowercase=lowercase)
    return metric.corpus_score(hypotheses, [references]).score, str(metric.get_signature())
