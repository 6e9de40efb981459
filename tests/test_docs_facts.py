"""Facts the pages list that the code also holds, checked against the code: which model configs
train with which optimiser, which figures a sweep's end draws, and the length buckets' defaults.
Each of these had drifted once (issue 25)."""

import re

from omegaconf import OmegaConf

from docs_check_cli import table_help
from docs_markdown import REPO
from posenc.report.buckets import CORPUS_EDGES, REAL_EDGES
from posenc.report.figures import BLEU_FIGURE, DELTA_FIGURE, LENGTH_FIGURE

CONFIGS = REPO / "docs" / "configs.md"


def models_by_optim() -> dict:
    """``{optim option: {model configs that pick it}}``, from each model config's defaults list."""
    picks: dict = {}
    for path in sorted((REPO / "conf" / "model").glob("*.yaml")):
        for entry in OmegaConf.load(path).get("defaults", []):
            if "override /optim" in entry:
                picks.setdefault(entry["override /optim"], set()).add(path.stem)
    return picks


def test_the_optim_row_names_every_model_that_picks_each_optimiser():
    row = next(line for line in CONFIGS.read_text(encoding="utf-8").splitlines() if line.startswith("| `optim` |"))
    options_cell = row.split("|")[2]
    options = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", options_cell)))
    named = {option: set(re.findall(r"`(\w+)`", models))
             for option, models in re.findall(r"`(\w+)` \(([^)]*)\)", options_cell)}
    picks = models_by_optim()
    assert options == set(picks), f"the optim row lists {sorted(options)}; conf/model picks {sorted(picks)}"
    for option, models in named.items():
        # "(the CPU models' picks)" names none; where the row names models, it names all of them
        assert not models or models == picks[option], f"optim={option}: the row names {models}, not {picks[option]}"


def test_the_sweep_ends_figures_are_the_ones_it_draws():
    paragraph = next(p for p in CONFIGS.read_text(encoding="utf-8").split("\n\n") if "When a sweep ends" in p)
    missing = [name for name in (DELTA_FIGURE, BLEU_FIGURE, LENGTH_FIGURE) if f"`{name}`" not in paragraph]
    assert not missing, f"docs/configs.md's sweep end leaves out {missing}"


def test_buckets_help_and_tables_page_give_every_default():
    help_ = " ".join(table_help().split())
    page = " ".join((REPO / "docs" / "tables.md").read_text(encoding="utf-8").split())
    for edges in (*CORPUS_EDGES.values(), REAL_EDGES):
        text = ",".join(map(str, edges))
        assert re.search(rf"(?<![\d,]){text}(?![\d,])", help_), f"posenc-table --help leaves out {text}"
        assert f"`{text}`" in page, f"docs/tables.md leaves out {text}"
    for corpus in CORPUS_EDGES:
        if corpus != "synthetic":  # "the synthetic corpus" in words
            assert corpus in help_ and f"`{corpus}`" in page, f"{corpus}'s buckets are not named as its own"
