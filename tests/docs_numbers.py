"""Every quoted measurement in the README and docs/ has its source: a number with a unit (a timing,
a score, a size) sits in a paragraph that links the results page that measured it.

What counts as a paragraph: a paragraph, a list item, a table together with the paragraph that
introduces it, a shell block's comments together with the paragraph before it (there a plain
``results/...`` path may name the page). Headings are left out (they title what their section's
paragraphs source). Numbers inside code spans are left out too: they are values a reader types or
a config holds (``budget.max_time_min=0``), not results.

A paragraph is sourced by a link into ``results/`` (``results/reference/`` for the papers'
numbers), or by calling its numbers estimates (the word "estimate": the reader is told they were
never measured). What is left must be listed in ``NOT_MEASURED_HERE``, each with its reason (a
default of the code or of SLURM, written out with its unit).

And a timing quoted exactly (not "about 4 min") in a sourced paragraph must appear, as written,
on a results page the paragraph links: the number and its source cannot drift apart.

Percentages are not scanned: on these pages they are nearly all levels (95% CI, 80% power, α =
5%), and the calibration's rates sit in paragraphs that link it."""

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document

from docs_markdown import blocks, without_code_spans

TIME = r"ms|s|seconds?|min|minutes?|h|hours?|days?"
UNIT = rf"GPU[ -]hours?|{TIME}|BLEU|chrF\+\+|chrF|GiB|MiB|KiB|TiB|GB|MB|KB|TB|words/s|tokens/s"
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# A number or a range (20-60), its unit, and a second part of a compound time (4 min 23 s).
QUOTED = re.compile(rf"(?<![\w.^/-])(?:[-+±]\s?)?{NUMBER}(?:\s?[-–]\s?{NUMBER})?\s?(?:{UNIT})"
                    rf"(?:\s\d+(?:\.\d+)?\s?(?:s|min))?(?![\w/+])")
TIMING = re.compile(rf"\d\s?(?:{TIME})$")
APPROXIMATE = re.compile(r"(?:about|around|roughly|nearly|near|under|over|below|above|within|up to|at most|"
                         r"less than|more than|some|~|≈)\s*$", re.IGNORECASE)
LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?[^)]*\)")
RESULTS_PATH = re.compile(r"(?<![\w/.])(?:\.\./)?(results/[\w./-]+\.md)")
ESTIMATE = re.compile(r"\bestimat", re.IGNORECASE)

# Numbers with a unit that no results page is the source of, each with the reason: settings (a
# default of the code or of SLURM, written out with its unit), and text this branch leaves alone.
NOT_MEASURED_HERE = {
    ("docs/clusters.md", "180 s"): "signal_delay_s, the slurm preset's default (conf/hydra/launcher/slurm.yaml)",
    ("docs/clusters.md", "5 s"): "how often the project's SLURM submitter polls squeue (its code)",
    ("docs/clusters.md", "121 s"): "SLURM's own hold on a requeued job (its BeginTime; tests/test_slurm.py lifts it)",
    ("docs/configs.md", "5 minutes"): "the margin the harness adds to a training time limit (its code)",
}


@dataclass(frozen=True)
class Quote:
    page: str
    line: int
    phrase: str
    sourced: bool
    results: tuple   # the results pages the paragraph links
    approximate: bool


def contexts(document: Document):
    """``(block, scanned text, context)``: each block whose numbers are scanned, the part of it that
    is scanned (a shell block: its comments), and the text whose links (or the word estimate)
    source them."""
    found = blocks(document)
    for i, block in enumerate(found):
        before = found[i - 1].text if i and found[i - 1].kind == "paragraph" else ""
        if block.kind in ("paragraph", "item"):
            yield block, block.text, block.text
        elif block.kind == "table":
            yield block, block.text, before + block.text
        elif block.kind == "code":
            comments = "\n".join(line.split("#", 1)[1] for line in block.text.splitlines() if "#" in line)
            yield block, comments, before + comments


def linked_results(context: str, page: Path, root: Path) -> tuple:
    targets = [t.partition("#")[0] for t in LINK_TARGET.findall(context)] + RESULTS_PATH.findall(context)
    pages = []
    for target in targets:
        for base in (page.parent, root):
            path = (base / target).resolve()
            if path.is_file() and (root / "results").resolve() in path.parents and path not in pages:
                pages.append(path)
                break
    return tuple(pages)


def quotes(page: Path, root: Path) -> list[Quote]:
    document = Document(page.read_text(encoding="utf-8"), str(page))
    name = str(page.relative_to(root))
    out = []
    for block, scanned, context in contexts(document):
        prose = LINK_TARGET.sub(lambda m: "]" + " " * (len(m.group(0)) - 1), without_code_spans(scanned))
        results = linked_results(context, page, root)
        sourced = bool(results) or bool(ESTIMATE.search(context))
        for match in QUOTED.finditer(prose):
            phrase = " ".join(match.group(0).split())
            line = block.line(document.text) + prose.count("\n", 0, match.start())
            if block.kind == "code":  # comments were joined: find the line in the block itself
                line = block.line(document.text) + _line_in(block.text, phrase)
            approximate = bool(APPROXIMATE.search(prose[max(0, match.start() - 12):match.start()]))
            out.append(Quote(name, line, phrase, sourced, results, approximate))
    return out


def _line_in(text: str, phrase: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if phrase in " ".join(line.split()):
            return number
    return 0


def unsourced(page: Path, root: Path) -> list[str]:
    """One line per quoted number that has no source and is not listed as measured nowhere."""
    return [f"{q.page}:{q.line}: {q.phrase!r} has no link to the results/ page that measured it"
            for q in quotes(page, root) if not q.sourced and (q.page, q.phrase) not in NOT_MEASURED_HERE]


def drifted(page: Path, root: Path) -> list[str]:
    """One line per exact timing that none of its paragraph's results pages shows as written."""
    out = []
    for q in quotes(page, root):
        if not (q.results and TIMING.search(q.phrase)) or q.approximate or "GPU" in q.phrase:
            continue  # roundings and GPU-hour estimates are not on any page as written
        if (q.page, q.phrase) in NOT_MEASURED_HERE:
            continue
        if not any(q.phrase in " ".join(p.read_text(encoding="utf-8").split()) for p in q.results):
            names = ", ".join(str(p.relative_to(root.resolve())) for p in q.results)
            out.append(f"{q.page}:{q.line}: {q.phrase!r} appears on none of the pages it links ({names})")
    return out
