"""A finished cell's system output on one test split, checked and ready to test: its hypotheses,
the references it was scored against, and BLEU's per-sentence sufficient statistics."""

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posenc import metrics
from posenc.atomic import atomic_file
from posenc.cells.record import bleu_options, chrf_options, is_ok, status_of
from posenc.metrics import SACREBLEU_VERSION, Scorer, corpus_bleu

# Per cell, beside its outputs: each output's sentence statistics, so a table is rendered again
# (posenc-table, a rerun of the sweep) without tokenizing and counting n-grams again.
STATS_CACHE = ".report-cache"
# The recorded BLEU is rounded to 2 decimals; a recomputation further off than this is another output.
REPRODUCE_TOLERANCE = 0.0051


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
    chrf_array: np.ndarray  # chrF++'s sufficient statistics, one row per sentence
    chrf_options: dict      # the CHRF(...) arguments (recorded; older records: their chrf_signature's, or chrF++)

    def arrays(self, metric: str):
        """``(statistics, options)`` of ``metric`` ("bleu" or "chrf")."""
        return (self.array, self.options) if metric == "bleu" else (self.chrf_array, self.chrf_options)


def read_lines(path) -> list:
    """One line per sentence, split on "\\n" only (as the harness writes them)."""
    text = path.read_bytes().decode("utf-8")
    return text[:-1].split("\n") if text else []


def cell_output(cell, split: str, testsets, scorer):
    """``(Output, "")`` or ``(None, why this cell's output cannot be tested)``."""
    record = cell.record
    if not is_ok(record):
        return None, f"cell {status_of(record)}"
    name = record.split(split).hypotheses
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
    options = bleu_options(record, split)
    array = _statistics(cell.dir, name, path, hypotheses, references, (testset.key, split), options, "bleu", scorer)
    chrf_opts = chrf_options(record, split)
    chrf_array = _statistics(cell.dir, name, path, hypotheses, references, (testset.key, split), chrf_opts, "chrf",
                             scorer)
    stats = array.tolist()
    recorded = record.split(split).bleu
    score = corpus_bleu(array.sum(0), options)
    if recorded is None or abs(score - float(recorded)) > REPRODUCE_TOLERANCE:
        return None, f"hypotheses give BLEU {score:.2f}, record says {recorded}"
    return Output(record.seed, hypotheses, references, testset.sources[split], stats, array, options,
                  testset.key, testset.name, chrf_array, chrf_opts), ""


def score_output(cell_dir: Path, name: str, hypotheses, references, testset_key: str, split: str, lowercase: bool,
                 tokenized, tokenized_references, on_tokenized: bool = False) -> dict:
    """Score a cell's output on one split, for its record: BLEU (its signature and options), tokenized
    BLEU, chrF++ (its signature and options), the scores rounded to 2 decimals as records keep them.
    ``name``: the detokenized hypotheses' file in ``cell_dir``, already written (the cache key hashes
    it). Their per-sentence statistics are cached beside it, under the options the table reads back
    from the record, so that the sweep's table finds them instead of extracting them again.
    ``on_tokenized``: the references are tokenized text (``metrics.bleu_on_tokenized``), and the
    signature says so (``metrics.TOKENIZED_TEXT``)."""
    bleu = (metrics.bleu_on_tokenized if on_tokenized else metrics.bleu)(lowercase)
    chrf = metrics.chrf(lowercase)
    bleu_score, bleu_signature = bleu.corpus_score(hypotheses, references)
    if on_tokenized:
        bleu_signature = f"{bleu_signature}|{metrics.TOKENIZED_TEXT}"
    tok_bleu, _ = metrics.tokenized_bleu(lowercase).corpus_score(tokenized, tokenized_references)
    chrf_score, chrf_signature = chrf.corpus_score(hypotheses, references)
    scorer = Scorer()
    for metric in (bleu, chrf):
        _statistics(Path(cell_dir), name, Path(cell_dir) / name, hypotheses, references, (testset_key, split),
                    metric.options, metric.kind, scorer)
    return {"bleu": round(bleu_score, 2), "bleu_signature": bleu_signature, "bleu_options": dict(bleu.options),
            "tok_bleu": round(tok_bleu, 2), "chrf": round(chrf_score, 2), "chrf_signature": chrf_signature,
            "chrf_options": dict(chrf.options)}


def _statistics(cell_dir, name, path, hypotheses, references, references_key, options, metric, scorer):
    """The per-sentence statistics of one output and metric, from the cell's cache or computed."""
    key = _stats_key(path, references_key[0], references_key[1], options, metric)
    array = _load_stats(cell_dir, name, key, len(hypotheses), metric)
    if array is None:
        array = np.asarray(scorer.sentence_stats(hypotheses, references, options, references_key, metric),
                           dtype=np.int64)
        _save_stats(cell_dir, name, key, array, metric)
    return array


def _stats_key(path: Path, testset_key: str, split: str, options: dict, metric: str) -> str:
    """What the statistics depend on: the output, the references, the metric and its code."""
    digest = hashlib.sha256(path.read_bytes())
    digest.update(repr((testset_key, split, metric, sorted(options.items()), SACREBLEU_VERSION)).encode())
    return digest.hexdigest()[:20]


def _cache_file(cell_dir: Path, name: str, key: str, metric: str) -> Path:
    return cell_dir / STATS_CACHE / f"{name}.{metric}.{key}.npy"


def _load_stats(cell_dir: Path, name: str, key: str, sentences: int, metric: str):
    try:
        array = np.load(_cache_file(cell_dir, name, key, metric), allow_pickle=False)
    except (OSError, ValueError):
        return None
    return array if array.ndim == 2 and array.shape[0] == sentences else None


def _save_stats(cell_dir: Path, name: str, key: str, array: np.ndarray, metric: str) -> None:
    """Atomically (posenc.atomic); a sweep directory that cannot be written just goes uncached."""
    target = _cache_file(cell_dir, name, key, metric)
    try:
        target.parent.mkdir(exist_ok=True)
        for stale in target.parent.glob(f"{name}.{metric}.*.npy"):
            stale.unlink(missing_ok=True)  # an earlier output of this cell
        with atomic_file(target) as handle:
            np.save(handle, array, allow_pickle=False)
    except OSError:
        return
