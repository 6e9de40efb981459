"""``posenc-table SWEEP_DIR [SWEEP_DIR ...]``: the table of one or more finished or partial sweeps,
with each row's difference from a baseline row and its significance, BLEU by source length, the
long split, and figures on request."""

import argparse
import sys
from pathlib import Path

from posenc.cells.sweep import SweepError, read_sweep
from posenc.report.buckets import BucketError, parse_edges
from posenc.report.compact import WIDTH, compact_text
from posenc.report.render import FORMATS, render_reports, render_trials
from posenc.report.rows import PRIMARIES, ReportError, Settings, check_primary, parse_baseline
from posenc.report.significance import TESTS
from posenc.report.table import build_reports
from posenc.stats.power import DEFAULT_EFFECT


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posenc-table", description=__doc__)
    parser.add_argument("sweep_dirs", nargs="+", metavar="SWEEP_DIR",
                        help="a sweep directory (its */result.json files and multirun.yaml); several: side by side")
    parser.add_argument("--format", choices=FORMATS, default="md")
    parser.add_argument("--baseline", metavar="KEY=VALUE",
                        help="the row every other row is compared with, among rows equal in every other key "
                             "(default: placement=both; a seeds or tune strategy's sweep: its hydra.sweeper.baseline)")
    parser.add_argument("--buckets", metavar="N,N,...",
                        help="upper edges of the source-length buckets in words, e.g. 10,20,30 "
                             "(default: 8,12 on the synthetic corpus, 8,12,16 on multi30k_de_en, "
                             "10,20,30,40 on other corpora and wherever a table mixes corpora)")
    parser.add_argument("--test", choices=list(TESTS), default="bs",
                        help="paired test: bs = bootstrap resampling (default), ar = approximate randomization")
    parser.add_argument("--resamples", type=int, default=0, metavar="N",
                        help="resamples (bs) or trials (ar); default sacreBLEU's: 1000 (bs), 10000 (ar)")
    parser.add_argument("--plots", metavar="OUTDIR", help="also write the figures (PNG) into OUTDIR")
    parser.add_argument("--power", action="store_true",
                        help="power planning: mde_bleu (smallest |Δ| found with 80%% power at the row's seeds and "
                             "test set) and seeds_needed (for |Δ| = --effect at --test-size sentences)")
    parser.add_argument("--effect", type=float, default=DEFAULT_EFFECT, metavar="D",
                        help=f"the |Δ| in BLEU that seeds_needed is for (default {DEFAULT_EFFECT:g}; with --power)")
    parser.add_argument("--test-size", type=int, default=None, metavar="M",
                        help="test sentences seeds_needed plans for, e.g. 3003 for newstest2014 "
                             "(default: this test set's; with --power)")
    parser.add_argument("--primary", default=Settings.primary, metavar="METRIC",
                        help="the question the verdict column (and the table's *) answers: "
                             f"{', '.join(PRIMARIES)} (default {Settings.primary}: BLEU on the test split); "
                             "the other verdicts are secondary")
    parser.add_argument("--compact", action="store_true",
                        help=f"only the answer: one table of at most {WIDTH} columns (the row, BLEU mean ± sd, Δ and "
                             "its CI, the verdict or where a sequential row stopped, the seeds), as a sweep's end "
                             "prints it; Markdown")
    parser.add_argument("--trials", action="store_true",
                        help="a tune strategy's sweep (hydra/sweeper=posenc_tune): list every trial "
                             "(its values, outcome, validation loss, cost) instead of the table")
    return parser


def _settings(args) -> Settings:
    """The report's settings from the command line; ReportError (or BucketError) for a bad one."""
    if args.resamples < 0:
        raise ReportError(f"--resamples {args.resamples}: must be positive (0 = sacreBLEU's default)")
    if not args.effect > 0:
        raise ReportError(f"--effect {args.effect:g}: must be a positive difference in BLEU (> 0), e.g. 0.5")
    if args.test_size is not None and args.test_size < 1:
        raise ReportError(f"--test-size {args.test_size}: must be a positive number of sentences, e.g. 3003")
    check_primary(args.primary)
    if not args.power and (args.effect != DEFAULT_EFFECT or args.test_size is not None):
        raise ReportError("--effect and --test-size plan seeds: they need --power")
    if args.compact and (args.format != "md" or args.power or args.trials):
        raise ReportError("--compact prints the one compact Markdown table: not with --format csv|latex, "
                          "--power or --trials")
    return Settings(baseline=parse_baseline(args.baseline) if args.baseline else Settings.baseline,
                    edges=parse_edges(args.buckets) if args.buckets else None,
                    test=args.test, resamples=args.resamples, power=args.power, effect=args.effect,
                    test_size=args.test_size, primary=args.primary)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
        if args.trials:
            sweeps = [read_sweep(Path(d)).require_cells() for d in args.sweep_dirs]
            try:
                print(render_trials(sweeps, args.format), end="")
            except ValueError as err:
                raise ReportError(str(err)) from None
            return 0
        reports = build_reports(args.sweep_dirs, settings, check=bool(args.baseline),
                                strategy_baseline=not args.baseline)
        print(compact_text(reports) if args.compact else render_reports(reports, args.format), end="")
        if args.plots:
            from posenc.report.figures import write_figures
            for path in write_figures(reports, Path(args.plots)):
                print(f"figure: {path}", file=sys.stderr)
    except (SweepError, ReportError, BucketError) as err:
        print(f"posenc-table: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
