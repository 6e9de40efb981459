"""``posenc-pe``: position-encoding analysis.

    posenc-pe sinusoidal --dim D --max-len N [--variant paper|fairseq] [--base B] --out DIR
    posenc-pe checkpoint CHECKPOINT.pt --out DIR [--max-len N] [--padding-idx I] [--kinds-module FILE]
    posenc-pe bases --dim D --max-len N [--bases B1,B2,...] [--variant V] --out DIR
    posenc-pe sweep SWEEP_DIR --out DIR [--max-len N] [--kinds-module FILE]

Each writes PNG figures and ``report.json`` into ``--out``, plus ``report.md`` (sinusoidal,
checkpoint), ``bases.md``/``bases.csv`` or ``sweep.md``/``sweep.csv``. Bad input gives one line on
stderr and exit status 2; a sweep with a cell that failed or could not be measured exits 1 after
writing everything and one summary line.
"""

import argparse
import math
import os
import sys

from posenc.analysis.measure.bases import DEFAULT_BASES as BASES
from posenc.cells.record import OK
from posenc.encodings.defaults import SINUSOID_BASE
from posenc.encodings.sinusoidal import SINUSOID_VARIANTS
from posenc.kinds.file import ENV as KINDS_ENV
from posenc.kinds.file import KindsFileError, load_kinds_file

DEFAULT_BASES = ",".join(f"{base:.0f}" for base in BASES)  # --bases as typed: 10,100,...,1000000


class _Parser(argparse.ArgumentParser):
    """argparse prints usage before its error; keep only the one error line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> int:
    print(f"posenc-pe: error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="posenc-pe", description="Position-encoding analysis, for the sinusoid or the position "
                "tables of a fairseq checkpoint: exercises 3.1-3.3 of the note on position embeddings that "
                "posenc grew from (3.1 relative positions as a linear map, 3.2 the values, 3.3 the scale; "
                "docs/analysis.md), proximity properties and probes.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser("sinusoidal", help="analyse the closed-form sinusoidal encoding (both variants)")
    s.add_argument("--dim", type=int, required=True, help="embedding dimension D (even, >= 4)")
    s.add_argument("--max-len", type=int, required=True, help="number of positions N (>= 2): rows PE(0)..PE(N-1)")
    s.add_argument("--variant", default="paper",
                   help=f"layout reported at top level: {' or '.join(SINUSOID_VARIANTS)} (default paper); "
                        "both are analysed")
    s.add_argument("--base", type=float, default=SINUSOID_BASE,
                   help=f"base b of the wavelengths 2*pi .. ~2*pi*b (> 1; default {SINUSOID_BASE:g})")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--no-probes", action="store_true", help="skip the probes (the slowest part)")
    s.add_argument("--folds", type=int, default=5, help="probe folds over held-out positions (default 5)")
    s.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("checkpoint", help="analyse the position tables (learned, sinusoidal) and relative attention "
                       "biases (t5, alibi) inside a fairseq checkpoint")
    c.add_argument("checkpoint", help="a fairseq checkpoint (.pt); only this file is unpickled")
    c.add_argument("--out", required=True, help="output directory")
    c.add_argument("--max-len", type=int, default=None, help="analyse only the first N positions")
    c.add_argument("--padding-idx", type=int, default=None,
                   help="padding index of the tables (default: the zero row among rows 0..3, else 1)")
    c.add_argument("--no-probes", action="store_true", help="skip the probes")
    c.add_argument("--folds", type=int, default=5)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--kinds-module", default=os.environ.get(KINDS_ENV), metavar="FILE",
                   help=f"your own kinds file, as posenc-run's kinds_module= (default: ${KINDS_ENV})")
    b = sub.add_parser("bases", help="what the sinusoid's base changes: wavelengths, monotonicity, probes, 3.1 error")
    b.add_argument("--dim", type=int, required=True, help="embedding dimension D (even, >= 4)")
    b.add_argument("--max-len", type=int, required=True, help="number of positions N (>= 2)")
    b.add_argument("--bases", default=DEFAULT_BASES, help=f"comma-separated bases, each > 1 (default {DEFAULT_BASES})")
    b.add_argument("--variant", default="paper", help=f"layout: {' or '.join(SINUSOID_VARIANTS)} (default paper)")
    b.add_argument("--out", required=True, help="output directory")
    b.add_argument("--no-probes", action="store_true", help="skip the probes (the slowest part)")
    b.add_argument("--folds", type=int, default=5)
    b.add_argument("--seed", type=int, default=0)
    w = sub.add_parser("sweep", help="the position tables of every cell of a sweep, beside its BLEU")
    w.add_argument("sweep_dir", help="a sweep directory (cells with result.json and checkpoints/checkpoint_best.pt); "
                   "only those checkpoints are unpickled")
    w.add_argument("--out", required=True, help="output directory")
    w.add_argument("--kinds-module", default=os.environ.get(KINDS_ENV), metavar="FILE",
                   help=f"your own kinds file, as posenc-run's kinds_module= (default: ${KINDS_ENV})")
    w.add_argument("--max-len", type=int, default=None,
                   help="analyse the first N positions (default: those training reached, else all rows)")
    w.add_argument("--no-probes", action="store_true", help="skip the probes")
    w.add_argument("--folds", type=int, default=5)
    w.add_argument("--seed", type=int, default=0)
    return p


def _prepare_out(path: str):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        return f"cannot create output directory {path}: {exc.strerror or exc}"
    return None


def _check_base(text_or_value, flag):
    """``(base, None)`` or ``(None, error)``: a finite number greater than 1."""
    try:
        base = float(text_or_value)
    except ValueError:
        return None, f"{flag}: {text_or_value!r} is not a number"
    if not (math.isfinite(base) and base > 1):
        return None, f"{flag} must be a finite number greater than 1, got {text_or_value}"
    return base, None


def _check_sinusoid_args(args):
    if args.dim < 4 or args.dim % 2:
        return f"--dim must be even and at least 4, got {args.dim}"
    if args.max_len < 2:
        return f"--max-len must be at least 2, got {args.max_len}"
    if args.variant not in SINUSOID_VARIANTS:
        return f"unknown --variant {args.variant!r}; allowed: {', '.join(SINUSOID_VARIANTS)}"
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.folds < 2:
        return _fail(f"--folds must be at least 2, got {args.folds}")
    if args.command in ("sinusoidal", "bases"):
        err = _check_sinusoid_args(args)
        if err:
            return _fail(err)
        if args.command == "sinusoidal":
            args.base, err = _check_base(args.base, "--base")
        else:
            args.bases, err = _parse_bases(args.bases)
        err = err or _prepare_out(args.out)
        if err:
            return _fail(err)
        return _run_sinusoidal(args) if args.command == "sinusoidal" else _run_bases(args)
    if args.max_len is not None and args.max_len < 2:
        return _fail(f"--max-len must be at least 2, got {args.max_len}")
    if args.kinds_module:  # its kinds are then read through their registrations, as the built-in ones
        try:
            load_kinds_file(args.kinds_module)
        except KindsFileError as err:
            return _fail(str(err))
    if args.command == "sweep":
        return _run_sweep(args)
    if args.padding_idx is not None and args.padding_idx < 0:
        return _fail(f"--padding-idx must be >= 0, got {args.padding_idx}")
    return _run_checkpoint(args)


def _run_sinusoidal(args) -> int:
    from posenc.analysis.measure.sinusoid import sinusoid_report
    from posenc.analysis.write.outputs import write_sinusoid

    report, extras = sinusoid_report(args.dim, args.max_len, args.variant, base=args.base,
                                     run_probes=not args.no_probes, folds=args.folds, seed=args.seed)
    write_sinusoid(report, extras, args.out)
    print(f"posenc-pe: sinusoid d={args.dim} N={args.max_len} ({args.variant}, base {args.base:g}): "
          f"relative_linear_max_error={report['relative_linear_max_error']:.3g}, "
          f"norm_mean={report['norm_mean']:.6g}; wrote {args.out}/report.json")
    return 0


def _run_checkpoint(args) -> int:
    from posenc.analysis.measure.checkpoint import checkpoint_report
    from posenc.analysis.read.fairseq_checkpoint import CheckpointError
    from posenc.analysis.write.outputs import write_checkpoint

    try:
        report, extras = checkpoint_report(args.checkpoint, padding_idx=args.padding_idx, max_len=args.max_len,
                                           run_probes=not args.no_probes, folds=args.folds, seed=args.seed)
    except CheckpointError as exc:
        return _fail(str(exc))
    err = _prepare_out(args.out)
    if err:
        return _fail(err)
    write_checkpoint(report, extras, args.out)
    kinds = ", ".join(f"{s} {k}" for s, k in report["kinds"].items())
    print(f"posenc-pe: {args.checkpoint}: {kinds}; wrote {args.out}/report.json")
    return 0


def _parse_bases(text: str):
    bases = []
    for item in text.split(","):
        base, err = _check_base(item.strip(), "--bases")
        if err:
            return None, err
        if base in bases:
            return None, f"--bases lists {item.strip()} twice"
        bases.append(base)
    return bases, None


def _run_bases(args) -> int:
    from posenc.analysis.measure.bases import bases_report
    from posenc.analysis.write.outputs import write_bases

    report, extras = bases_report(args.dim, args.max_len, args.variant, args.bases, run_probes=not args.no_probes,
                                  folds=args.folds, seed=args.seed)
    write_bases(report, extras, args.out)
    spans = ", ".join(f"{r['base']:g}: falls to m={r['monotone_up_to']}" for r in report["rows"])
    print(f"posenc-pe: bases d={args.dim} N={args.max_len} ({args.variant}): {spans}; wrote {args.out}/bases.md")
    return 0


def _run_sweep(args) -> int:
    from posenc.analysis.measure.sweep import columns, init_references, sweep_rows
    from posenc.analysis.write.outputs import write_sweep
    from posenc.cells.sweep import SweepError

    try:
        rows, reports, extras, notes = sweep_rows(args.sweep_dir, max_len=args.max_len, run_probes=not args.no_probes,
                                                  folds=args.folds, seed=args.seed)
    except SweepError as exc:
        return _fail(str(exc))
    err = _prepare_out(args.out)
    if err:
        return _fail(err)
    refs = init_references(rows, reports, run_probes=not args.no_probes, folds=args.folds, seed=args.seed)
    report = {"tool": "posenc-pe", "mode": "sweep", "sweep": os.path.abspath(args.sweep_dir), "notes": notes,
              "rows": rows, "init_reference": refs, "cells": reports}
    write_sweep(report, rows, extras, columns(), args.out)
    short = [r for r in rows if r["status"] != OK or not r["measured"]]
    print(f"posenc-pe: sweep {args.sweep_dir}: {len(rows)} cells, {len(rows) - len(short)} ok and measured"
          + (f", {len(short)} not ({', '.join(r['cell'] + ': ' + r['status'] for r in short)})" if short else "")
          + f"; wrote {args.out}/sweep.md")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
