"""No timing, score or size in the README or docs/ without its source: each sits in a paragraph
that links the results/ page that measured it (or says it is an estimate, or is listed with the
reason no page measured it), and an exact timing appears as written on the page it links. The
pages are read when the tests run."""

import pytest

from docs_markdown import REPO, pages
from docs_numbers import NOT_MEASURED_HERE, drifted, quotes, unsourced

IDS = {"ids": lambda p: str(p.relative_to(REPO))}


@pytest.mark.parametrize("page", pages(), **IDS)
def test_every_quoted_number_links_its_source(page):
    missing = unsourced(page, REPO)
    assert not missing, "numbers without a source:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", pages(), **IDS)
def test_every_exact_timing_is_the_one_its_source_shows(page):
    wrong = drifted(page, REPO)
    assert not wrong, "timings that differ from their results page:\n" + "\n".join(wrong)


def test_every_listed_exception_is_still_on_its_page():
    found = {(q.page, q.phrase) for page in pages() for q in quotes(page, REPO)}
    stale = sorted(set(NOT_MEASURED_HERE) - found)
    assert not stale, f"NOT_MEASURED_HERE entries that match nothing any more (remove them): {stale}"


PAGE = """# Numbers

## A heading may say 4 min

Unsourced: the run took 4 min 23 s and scored 27.49 BLEU.

Sourced: 12 cells in 3 min 57 s ([benchmarks](../results/bench.md)), about 2 s for the table.

Drifted: 12 cells in 3 min 50 s ([benchmarks](../results/bench.md)).

By the project's estimate, 20-60 GPU hours a cell. A value typed is no result: `budget.max_time_min=5`.

- an item of its own: 9 min in all
- another, sourced: 3 min 57 s ([bench](../results/bench.md))

The table below comes from [the study](../results/bench.md):

| run | wall |
|---|---|
| two jobs | 3 min 57 s |

| a table with no introduction | 15 s |
|---|---|

```bash
make table4   # about 4 min, results/bench.md (a block's comments are one paragraph)
make table4   # 3 min 57 s
```

```bash
make test     # 26 min 28 s
```
"""


def test_the_checker_names_each_number_without_a_source(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "bench.md").write_text("| two jobs | 3 min 57 s (237 s) |\n")
    page = tmp_path / "docs" / "numbers.md"
    page.write_text(PAGE)
    assert unsourced(page, tmp_path) == [
        "docs/numbers.md:5: '4 min 23 s' has no link to the results/ page that measured it",
        "docs/numbers.md:5: '27.49 BLEU' has no link to the results/ page that measured it",
        "docs/numbers.md:13: '9 min' has no link to the results/ page that measured it",
        "docs/numbers.md:22: '15 s' has no link to the results/ page that measured it",
        "docs/numbers.md:31: '26 min 28 s' has no link to the results/ page that measured it",
    ]
    # "about 2 s" is a rounding, not checked against the page; 3 min 50 s is quoted exactly and wrong.
    assert drifted(page, tmp_path) == [
        "docs/numbers.md:9: '3 min 50 s' appears on none of the pages it links (results/bench.md)",
    ]
