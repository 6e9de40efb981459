"""A finished cell's system output on one test split, checked and ready to test: its hypotheses,
the references it was scored against, and BLEU's per-sentence sufficient statistics."""

from dataclasses import dataclass

import numpy as np

from posenc.report.significance import bleu_options, corpus_bleu

SPLITS = ("test", "test_long")
# The recorded BLEU is rounded to 2 decimals; a recomputation further off than this is another output.
REPRODUCE_TOLERANCE = 0.0051


def field(name: str, split: str) -> str:
    """A record's field for a split: ``bleu`` on test, ``bleu_test_long`` on the long split."""
    return name if split == "test" else f"{name}_{split}"


@dataclass(frozen=True)
class Output:
    seed: object
    hypotheses: list
    references: list
    sources: list
    stats: list            # BLEU's sufficient statistics, one list per sentence (as sacreBLEU gives them)
    array: np.ndarray      # the same as an array, for sums over subsets
    options: dict          # the BLEU(...) arguments the cell was scored with
    testset_key: str
    corpus: str


def read_lines(path) -> list:
    """One line per sentence, split on "\\n" only (as the harness writes them)."""
    text = path.read_bytes().decode("utf-8")
    return text[:-1].split("\n") if text else []


def cell_output(cell, split: str, testsets, scorer):
    """``(Output, "")`` or ``(None, why this cell's output cannot be tested)``."""
    record = cell.record
    if record.get("status") != "ok":
        return None, f"cell {record.get('status')}"
    name = record.get(field("hypotheses", split))
    if not name:
        return None, "no hypotheses"
    path = cell.dir / name
    if not path.is_file():
        return None, f"hypotheses file missing ({name})"
    testset, why = testsets.find(record)
    if testset is None:
        return None, why
    if split not in testset.references:
        return None, f"test set has no {split} split"
    try:
        hypotheses = read_lines(path)
    except (OSError, UnicodeDecodeError) as err:
        return None, f"hypotheses unreadable ({type(err).__name__})"
    references = testset.references[split]
    if len(hypotheses) != len(references):
        return None, f"{len(hypotheses)} hypotheses for {len(references)} references"
    options = bleu_options(str(record.get(field("bleu_signature", split)) or ""))
    stats = scorer.sentence_stats(hypotheses, references, options, (testset.key, split))
    array = np.asarray(stats, dtype=np.int64)
    recorded = record.get(field("bleu", split))
    score = corpus_bleu(array.sum(0), options)
    if recorded is None or abs(score - float(recorded)) > REPRODUCE_TOLERANCE:
        return None, f"hypotheses give BLEU {score:.2f}, record says {recorded}"
    return Output(record.get("seed"), hypotheses, references, testset.sources[split], stats, array, options,
                  testset.key, testset.name), ""
