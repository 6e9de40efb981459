"""The papers' numbers, and the rows they apply to (never a paper's number beside a row it does
not describe)."""

import csv
from dataclasses import dataclass
from pathlib import Path

from posenc.confdir import REFERENCE_DIR

CONVS2S = REFERENCE_DIR / "convs2s_table4.csv"
VASWANI = REFERENCE_DIR / "vaswani2017_table3_e.csv"

SOURCES = {
    "G17": "Gehring et al. (2017), ConvS2S Table 4: WMT'14 En-De, learned positions, valid PPL and "
           "tokenized BLEU on newstest2014, mean of 3 runs",
    "V17": "Vaswani et al. (2017), Table 3 row (E) vs base: En-De newstest2013, dev PPL (per wordpiece) "
           "and BLEU, learned vs sinusoidal positions",
}
# Each paper and its test set, short enough for the compact table's caption.
CAPTIONS = {
    "G17": "Gehring et al. (2017) Table 4, tokenized BLEU on WMT'14 En-De newstest2014",
    "V17": "Vaswani et al. (2017) Table 3 (E), BLEU on En-De newstest2013",
}
WHERE = ("paper columns are filled only where a paper measured the same comparison: G17 beside fconv "
         "rows with learned positions; V17 beside Transformer rows with positions on both sides, where "
         "the sweep compares learned with sinusoidal positions; empty (-) elsewhere")


def _read(path: Path, key: str) -> dict:
    with open(path, newline="", encoding="utf-8") as handle:
        return {row[key]: row for row in csv.DictReader(handle)}


def paper_numbers(identities, families) -> list:
    """For each row identity (a dict with model, pe, placement ...) and its model family (as its
    cells recorded it): ``(source, ppl, bleu)`` from the paper that applies, or ``("", "", "")``.
    V17 needs both kinds in the same comparison, so it looks at all the identities of one sweep
    together."""
    convs2s = _read(CONVS2S, "placement")
    vaswani = _read(VASWANI, "pe")
    compared = {}
    for ident, family in zip(identities, families):
        if family == "transformer" and ident.get("placement") == "both":
            rest = tuple(sorted((k, str(v)) for k, v in ident.items() if k != "pe"))
            compared.setdefault(rest, set()).add(ident.get("pe"))
    out = []
    for ident, family in zip(identities, families):
        if family == "fconv" and ident.get("pe") == "learned" and ident.get("placement") in convs2s:
            row = convs2s[ident["placement"]]
            out.append(("G17", row["valid_ppl"], row["bleu"]))
            continue
        rest = tuple(sorted((k, str(v)) for k, v in ident.items() if k != "pe"))
        if family == "transformer" and ident.get("placement") == "both" and ident.get("pe") in vaswani \
                and {"learned", "sinusoidal"} <= compared.get(rest, set()):
            row = vaswani[ident["pe"]]
            out.append(("V17", row["dev_ppl"], row["bleu"]))
            continue
        out.append(("", "", ""))
    return out


@dataclass
class PaperNumbers:
    """A row's numbers from the paper that applies (``paper_numbers``; "" where none does) and the
    paper's own Δ for the row's comparison where that paper measured its baseline too (else None)."""
    source: str = ""
    ppl: str = ""
    bleu: str = ""
    delta: float = None

    def columns(self) -> dict:
        return {"paper_source": self.source, "paper_ppl": self.ppl, "paper_bleu": self.bleu,
                "paper_delta": self.delta}
