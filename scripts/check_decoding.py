#!/usr/bin/env python
"""Decoding in the trainer against stock fairseq-generate, on cells that already ran: for every cell
under the given directories (a sweep, or one cell), the fairseq-generate line of its ``commands.sh``
is run by hand (with the variables it exports), in a process of its own, on the cell's own
checkpoint, and every per-sentence line
(``S-``, ``T-``, ``H-``, ``D-``, ``P-``: source, reference, hypothesis with its score, detokenized
text, positional scores) must be byte-identical to the cell's ``generate-<split>.log``, which the
trainer wrote (its ``train.log`` says so). Prints one line per cell and split; exit status 1 on
any difference. tests/test_decode_in_trainer.py runs it on small cells; the real budget once:

    make table4 && .venv/bin/python scripts/check_decoding.py results/table4
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from posenc.cells import layout  # noqa: E402
from posenc.trainer.decode import DECODED_MARK  # noqa: E402

PER_SENTENCE = re.compile(r"^[STHDP]-\d+\t")


def per_sentence_lines(text: str) -> list:
    return [line for line in text.splitlines() if PER_SENTENCE.match(line)]


def stock_generate(cell: Path, split: str) -> str:
    """The cell's fairseq-generate line of commands.sh, run by hand with the variables commands.sh
    exports (the harness's: a thread count changes the scores' last digits); its output."""
    lines = (cell / layout.COMMANDS_FILE).read_text().splitlines()
    line = next(x for x in lines if x.endswith(f"> {layout.generate_log(split)}"))
    argv = shlex.split(line)
    argv = argv[:argv.index(">")]
    exported = dict(shlex.split(x)[1].split("=", 1) for x in lines if x.startswith("export "))
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", **exported}
    proc = subprocess.run(argv, cwd=cell, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"fairseq-generate failed in {cell}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc.stdout


def compare(cell: Path, split: str) -> str:
    """"" when the trainer decoded ``split`` exactly as stock fairseq-generate does, else why not."""
    if f"{DECODED_MARK} {split} " not in (cell / layout.TRAIN_LOG).read_text(errors="replace"):
        return f"{split} was not decoded in the trainer"
    ours = per_sentence_lines((cell / layout.generate_log(split)).read_text())
    stock = per_sentence_lines(stock_generate(cell, split))
    if not stock:
        return f"fairseq-generate printed no sentence for {split}"
    if ours != stock:
        first = next((i for i, (a, b) in enumerate(zip(ours, stock)) if a != b), min(len(ours), len(stock)))
        return f"{split} differs from fairseq-generate: {len(ours)} against {len(stock)} lines, first at line {first}"
    return ""


def cells_under(folders) -> list:
    return sorted({p.parent for folder in folders for p in Path(folder).glob(f"**/{layout.COMMANDS_FILE}")})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="sweep or cell directories")
    args = parser.parse_args(argv)
    cells, bad = cells_under(args.folders), 0
    for cell in cells:
        splits = [log.name[len("generate-"):-len(".log")] for log in sorted(cell.glob("generate-*.log"))]
        for split in splits:
            why = compare(cell, split)
            bad += bool(why)
            lines = len(per_sentence_lines((cell / layout.generate_log(split)).read_text()))
            verdict = f"DIFFERS: {why}" if why else "identical"
            print(f"{cell.name} {split} ({lines} lines): {verdict}", flush=True)
    print(f"{len(cells)} cells: {'all identical' if not bad and cells else f'{bad} split(s) differ or none found'}")
    return 1 if bad or not cells else 0


if __name__ == "__main__":
    sys.exit(main())
