"""``posenc-pe``: position-encoding analysis.

    posenc-pe sinusoidal --dim D --max-len N [--variant paper|fairseq] --out DIR
    posenc-pe checkpoint CHECKPOINT.pt --out DIR [--max-len N] [--padding-idx I]

Both write PNG figures, ``report.json`` and ``report.md`` into ``--out``. Bad input gives one line
on stderr and exit status 2.
"""

import argparse
import os
import sys

from posenc.encodings.sinusoidal import SINUSOID_VARIANTS


class _Parser(argparse.ArgumentParser):
    """argparse prints usage before its error; keep only the one error line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> int:
    print(f"posenc-pe: error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="posenc-pe", description="Position-encoding analysis: exercises 3.1-3.3, proximity "
                "properties and probes, for the sinusoid or the position tables of a fairseq checkpoint.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser("sinusoidal", help="analyse the closed-form sinusoidal encoding (both variants)")
    s.add_argument("--dim", type=int, required=True, help="embedding dimension D (even, >= 4)")
    s.add_argument("--max-len", type=int, required=True, help="number of positions N (>= 2): rows PE(0)..PE(N-1)")
    s.add_argument("--variant", default="paper",
                   help=f"layout reported at top level: {' or '.join(SINUSOID_VARIANTS)} (default paper); both are analysed")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--no-probes", action="store_true", help="skip the probes (the slowest part)")
    s.add_argument("--folds", type=int, default=5, help="probe folds over held-out positions (default 5)")
    s.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("checkpoint", help="analyse the position tables inside a fairseq checkpoint")
    c.add_argument("checkpoint", help="a fairseq checkpoint (.pt); only this file is unpickled")
    c.add_argument("--out", required=True, help="output directory")
    c.add_argument("--max-len", type=int, default=None, help="analyse only the first N positions")
    c.add_argument("--padding-idx", type=int, default=None,
                   help="padding index of the tables (default: the zero row among rows 0..3, else 1)")
    c.add_argument("--no-probes", action="store_true", help="skip the probes")
    c.add_argument("--folds", type=int, default=5)
    c.add_argument("--seed", type=int, default=0)
    return p


def _prepare_out(path: str):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        return f"cannot create output directory {path}: {exc.strerror or exc}"
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.folds < 2:
        return _fail(f"--folds must be at least 2, got {args.folds}")
    if args.command == "sinusoidal":
        if args.dim < 4 or args.dim % 2:
            return _fail(f"--dim must be even and at least 4, got {args.dim}")
        if args.max_len < 2:
            return _fail(f"--max-len must be at least 2, got {args.max_len}")
        if args.variant not in SINUSOID_VARIANTS:
            return _fail(f"unknown --variant {args.variant!r}; allowed: {', '.join(SINUSOID_VARIANTS)}")
        err = _prepare_out(args.out)
        if err:
            return _fail(err)
        return _run_sinusoidal(args)
    if args.max_len is not None and args.max_len < 2:
        return _fail(f"--max-len must be at least 2, got {args.max_len}")
    if args.padding_idx is not None and args.padding_idx < 0:
        return _fail(f"--padding-idx must be >= 0, got {args.padding_idx}")
    return _run_checkpoint(args)


def _run_sinusoidal(args) -> int:
    from posenc.analysis.analyze import sinusoid_report
    from posenc.analysis.report import sinusoid_figures, sinusoid_markdown, write_json, write_markdown

    report, extras = sinusoid_report(args.dim, args.max_len, args.variant, run_probes=not args.no_probes,
                                     folds=args.folds, seed=args.seed)
    report["figures"] = sinusoid_figures(report, extras, args.out)
    write_json(report, args.out)
    write_markdown(sinusoid_markdown(report), args.out)
    print(f"posenc-pe: sinusoid d={args.dim} N={args.max_len} ({args.variant}): relative_linear_max_error="
          f"{report['relative_linear_max_error']:.3g}, norm_mean={report['norm_mean']:.6g}; wrote {args.out}/report.json")
    return 0


def _run_checkpoint(args) -> int:
    from posenc.analysis.analyze import checkpoint_report
    from posenc.analysis.checkpoint import CheckpointError
    from posenc.analysis.report import checkpoint_figures, checkpoint_markdown, write_json, write_markdown

    try:
        report, extras = checkpoint_report(args.checkpoint, padding_idx=args.padding_idx, max_len=args.max_len,
                                           run_probes=not args.no_probes, folds=args.folds, seed=args.seed)
    except CheckpointError as exc:
        return _fail(str(exc))
    err = _prepare_out(args.out)
    if err:
        return _fail(err)
    report["figures"] = checkpoint_figures(report, extras, args.out)
    write_json(report, args.out)
    write_markdown(checkpoint_markdown(report), args.out)
    kinds = ", ".join(f"{s} {k}" for s, k in report["kinds"].items())
    print(f"posenc-pe: {args.checkpoint}: {kinds}; wrote {args.out}/report.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
