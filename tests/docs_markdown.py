"""The hand-written pages as the doc tests read them: fenced code blocks (found by Sybil's Markdown
lexer, the one the command checks run on), prose blocks (paragraphs, list items, tables, headings)
and the code spans inside them."""

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

REPO = Path(__file__).resolve().parent.parent

# A fence's info string: a language word or nothing (statistics.md has a bare ``` block of commands).
FENCE_INFO = re.compile(r"(?P<language>[\w+-]*)[^\n]*$\n", re.MULTILINE)
SHELL = {"", "bash", "sh", "shell", "console"}
HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s")
TABLE_ROW = re.compile(r"^\s*\|")
# A code span: a run of backticks, then everything up to the next run of the same length.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def pages(root: Path = REPO) -> list[Path]:
    """The pages whose commands and numbers are checked: the README and docs/ (results/ pages are
    the records of runs already made, with the commands as they were then)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def fenced_blocks(document: Document):
    """Regions of the fenced code blocks, each with its ``language`` and ``source`` lexemes."""
    yield from RawFencedCodeBlockLexer(info_pattern=FENCE_INFO)(document)


@dataclass(frozen=True)
class Block:
    kind: str      # "paragraph", "item", "table", "heading" or "code"
    start: int     # offset of its first character in the page
    text: str

    def line(self, text: str) -> int:
        return text.count("\n", 0, self.start) + 1


def blocks(document: Document) -> list[Block]:
    """The page cut into blocks in page order: each fenced code block, and between them runs of
    non-blank lines cut again at every heading, list item and change between table and prose."""
    text = document.text
    fences = sorted(fenced_blocks(document), key=lambda region: region.start)
    out, place = [], 0
    for region in fences:
        out += _prose_blocks(text, place, region.start)
        source = region.lexemes["source"]
        out.append(Block("code", region.start, str(source)))
        place = region.end
    return out + _prose_blocks(text, place, len(text))


def _prose_blocks(text: str, begin: int, end: int) -> list[Block]:
    out: list[Block] = []
    kind, start, lines = None, 0, []

    def close():
        if lines:
            out.append(Block(kind, start, "".join(lines)))
        lines.clear()

    offset = begin
    for line in text[begin:end].splitlines(keepends=True):
        here, offset = offset, offset + len(line)
        if not line.strip():
            close()
            continue
        new = ("heading" if HEADING.match(line) else "item" if ITEM.match(line)
               else "table" if TABLE_ROW.match(line) else "paragraph")
        # A paragraph line continues the block it follows (an item's lazy continuation too),
        # except a table's or a heading's; a table row continues only a table.
        joins = lines and (kind in ("paragraph", "item") if new == "paragraph" else new == kind == "table")
        if not joins:
            close()
            kind, start = new, here
        lines.append(line)
    close()
    return out


def code_spans(block: Block):
    """``(start, end, content)`` of each code span, offsets in the block; a span may run over
    lines (its line breaks become spaces), and in a table ``\\|`` is a literal ``|``, as GitHub
    renders it."""
    for match in CODE_SPAN.finditer(block.text):
        content = " ".join(match.group(2).split())
        if block.kind == "table":
            content = content.replace("\\|", "|")
        yield match.start(), match.end(), content


def without_code_spans(text: str) -> str:
    """The prose of a block with its code spans blanked (same length, so offsets still hold)."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)
