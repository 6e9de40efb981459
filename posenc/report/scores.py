"""A table row's scores over its seeds as typed fields, as sacreBLEU's ``Score`` is a score rather
than a dict: the renderers read ``row.scores.split("test").bleu.mean`` instead of indexing an
f-string key, so a misspelt name fails at once instead of reading None. ``posenc.report.stats``
computes them (``row_scores``); ``RowScores.columns`` alone names them as the CSV's flat columns."""

from dataclasses import dataclass
from dataclasses import field as dc_field

from posenc.cells.record import field


@dataclass(frozen=True)
class MeanSd:
    """A metric's mean and sample sd over a row's seeds; both None when no seed has the metric."""
    mean: float = None
    sd: float = None


@dataclass(frozen=True)
class Interval:
    """BLEU's 95% interval of a row: over seeds (``kind`` "seeds"), over one seed's sentences
    ("bootstrap"), or none ("": no finished seed)."""
    low: float = None
    high: float = None
    kind: str = ""


@dataclass(frozen=True)
class SplitScores:
    """The metrics of one test split, each over the row's seeds."""
    bleu: MeanSd = MeanSd()
    tok_bleu: MeanSd = MeanSd()
    chrf: MeanSd = MeanSd()


@dataclass
class RowScores:
    """A row's scores: per split (``test``, and ``test_long`` when a cell scored it), the validation
    perplexity, BLEU's interval on test, and which seeds finished, failed, were time-capped or resumed
    inexactly."""
    splits: dict = dc_field(default_factory=dict)   # split -> SplitScores
    valid_ppl: MeanSd = MeanSd()
    bleu_ci: Interval = Interval()
    seeds: list = dc_field(default_factory=list)         # the seeds that finished ok
    not_ok: list = dc_field(default_factory=list)        # "seed 2 failed", one per cell that did not
    time_capped: list = dc_field(default_factory=list)   # the ok seeds stopped at budget.max_time_min
    resumed_inexactly: list = dc_field(default_factory=list)  # the ok seeds resumed inexactly (issue 48)

    @property
    def seeds_ok(self) -> int:
        return len(self.seeds)

    def split(self, split: str) -> SplitScores:
        """The split's scores; an empty ``SplitScores`` (every mean None) for a split no cell scored."""
        return self.splits.get(split, SplitScores())

    def columns(self) -> dict:
        """The scores as the CSV's columns, in its order (``bleu``, ``bleu_sd``, ..., ``time_capped``)."""
        out = {}
        means = [(field("bleu", "test"), self.split("test").bleu), ("tok_bleu", self.split("test").tok_bleu),
                 ("valid_ppl", self.valid_ppl)]
        if "test_long" in self.splits:
            long = self.splits["test_long"]
            means += [(field("bleu", "test_long"), long.bleu), (field("tok_bleu", "test_long"), long.tok_bleu)]
        for name, score in means:
            out[name], out[f"{name}_sd"] = score.mean, score.sd
        out.update(bleu_ci_low=self.bleu_ci.low, bleu_ci_high=self.bleu_ci.high, bleu_ci_kind=self.bleu_ci.kind)
        for split, scores in self.splits.items():
            out[field("chrf", split)], out[field("chrf", split) + "_sd"] = scores.chrf.mean, scores.chrf.sd
        out.update(seeds=self.seeds, seeds_ok=self.seeds_ok, not_ok=self.not_ok, time_capped=self.time_capped,
                   resumed_inexactly=self.resumed_inexactly)
        return out


@dataclass
class LengthScores:
    """BLEU by source-length bucket on test (``rows._buckets``): each bucket's label -> the mean over
    seeds of the bucket's BLEU (None where no seed has a sentence there), and the seeds it is over."""
    bleu: dict = dc_field(default_factory=dict)
    seeds: int = 0

    def columns(self) -> dict:
        """``bleu_len_1-8``, ..., ``bucket_seeds``."""
        return {**{f"bleu_len_{label}": value for label, value in self.bleu.items()}, "bucket_seeds": self.seeds}
