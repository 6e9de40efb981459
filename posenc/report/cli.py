"""``posenc-table SWEEP_DIR [--format md|csv|latex]``: the table of a finished or partial sweep."""

import argparse
import sys

from posenc.report.table import SweepError, load_sweep, render


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="posenc-table", description=__doc__)
    parser.add_argument("sweep_dir", help="a sweep directory (its */result.json files and multirun.yaml)")
    parser.add_argument("--format", choices=["md", "csv", "latex"], default="md")
    args = parser.parse_args(argv)
    try:
        print(render(load_sweep(args.sweep_dir), args.format), end="")
    except SweepError as err:
        print(f"posenc-table: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
