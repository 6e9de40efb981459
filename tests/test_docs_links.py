"""The docs a newcomer navigates: every relative link and `#anchor` in the README, docs/ and the
results pages resolves, by GitHub's rules for heading anchors, and the README stays a landing page."""

import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files(root: Path = REPO) -> list[Path]:
    """The hand-written pages (results/pe/*.md and the like are written by the tools)."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "results").glob("*.md"))]
    pages += sorted((root / "results").glob("*/README.md"))
    return [p for p in pages if p.is_file()]


def prose_lines(text: str, blank_code: bool = True):
    """(line number, line) outside fenced code blocks, with inline code spans blanked out (a
    link inside code is no link) unless ``blank_code`` is false (a heading's code is its text)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, INLINE_CODE.sub("", line) if blank_code else line


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger's rules on the rendered text):
    markup dropped, lowercase, punctuation dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays, its target goes
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<![^\W_])_+|_+(?![^\W_])", "", text)  # _emphasis_ markers, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8"), blank_code=False):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def links(path: Path):
    """(line number, target) of every inline or reference-style link and image."""
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in INLINE_LINK.findall(line):
            yield number, target
        definition = REFERENCE_DEF.match(line)
        if definition:
            yield number, definition.group(1)


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """'file:line: target (why)' for each relative link of the file that does not resolve."""
    broken = []
    for number, target in links(path):
        if SCHEME.match(target):
            continue  # http(s), mailto: not checked offline
        where, _, anchor = target.partition("#")
        dest = (path.parent / where).resolve() if where else path
        why = None
        if root.resolve() not in (dest, *dest.parents):
            why = "outside the repository"
        elif not dest.exists():
            why = "no such file"
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            why = f"no heading with anchor #{anchor} in {dest.relative_to(root.resolve())}"
        if why:
            broken.append(f"{path.relative_to(root)}:{number}: {target} ({why})")
    return broken


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        # github-slugger's own examples (its README) and GitHub's rendering of the same headings
        ("foo", "foo"),
        ("Привет non-latin 你好", "привет-non-latin-你好"),
        ("😄 emoji", "-emoji"),
        ("I ♥ unicode", "i--unicode"),
        ("foo _italic_ bar", "foo-italic-bar"),
        ("foo_foo_bar", "foo_foo_bar"),
        ("`a.b` c", "ab-c"),
        ("1) not a list", "1-not-a-list"),
        ("heading with a period.txt", "heading-with-a-periodtxt"),
        # anchors GitHub gave this project's own headings
        ("Tables: significance, length, paper columns", "tables-significance-length-paper-columns"),
        ("Weights & Biases", "weights--biases"),
        ("make table4: one cell at a time against two joblib jobs (issues 10 and 13)",
         "make-table4-one-cell-at-a-time-against-two-joblib-jobs-issues-10-and-13"),
        ("`report.json`", "reportjson"),
        ("See [the docs](docs/x.md) **now**", "see-the-docs-now"),
    ],
)
def test_slug_follows_github(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Foo\n\n## foo\n\n```\n# foo (in code: no heading)\n```\n\n### Foo\n\n## Bar\n"
                    "\n## `make test` and `.ci/run`\n")
    assert anchors(page) == {"foo", "foo-1", "foo-2", "bar", "make-test-and-cirun"}


def test_checker_reports_each_broken_link_and_nothing_else(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## A section\n")
    (tmp_path / "figure.png").write_bytes(b"\x89PNG")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n"
        "[ok](docs/other.md) [ok anchor](docs/other.md#a-section) [ok here](#title) ![ok](figure.png)\n"
        "[missing file](docs/nope.md)\n"
        "[missing anchor](docs/other.md#no-section) [missing here](#nothing)\n"
        "[outside](../elsewhere.md) [web](https://example.org/x#y)\n"
        "`[in code](nope.md)`\n"
        "```\n[in a block](nope.md)\n```\n"
        "[ref]: docs/gone.md\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "README.md:4: docs/nope.md (no such file)",
        "README.md:5: docs/other.md#no-section (no heading with anchor #no-section in docs/other.md)",
        "README.md:5: #nothing (no heading with anchor #nothing in README.md)",
        "README.md:6: ../elsewhere.md (outside the repository)",
        "README.md:11: docs/gone.md (no such file)",
    ]


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = broken_links(page)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_a_landing_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"
    linked = {(REPO / target.partition("#")[0]).resolve() for _, target in links(REPO / "README.md")}
    unlinked = [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
