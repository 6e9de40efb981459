"""The answer first: the compact table (at most 100 columns, one line per row) that a sweep's end
prints after its summary line and before the path of the full ``table.md``, and ``posenc-table
--compact``; a row that a sequential design has decided books no seeds in the power table."""

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from posenc.cells.strategy import SeedsRow, SeedsSettings, SeedsState, StateCell
from posenc.cells.sweep import read_sweep
from posenc.harness.sweep.report import SweepReport
from posenc.report.compact import WIDTH, compact_table, fit
from posenc.report.references import PaperNumbers
from posenc.report.render import render_reports
from posenc.report.scores import MeanSd, RowScores, SplitScores
from posenc.report.sequential import short_stop
from posenc.report.stats import Comparison, Verdict
from posenc.report.table import sweep_end_report
from posenc.stats.sequential import Design, Look, repeated_ci
from report_fixtures import degrade, synthetic_test_sets, write_cell, write_plan, write_testset

BIN = Path(sys.executable).parent
RATES = {"both": 0.1, "source": 0.1, "none": 0.45}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Three placements, three seeds each: source as good as both, none clearly worse."""
    root = tmp_path_factory.mktemp("compact")
    splits = synthetic_test_sets(test=60, test_long=0)
    splits = {"test": splits["test"]}
    corpus = write_testset(root / "cache", splits)
    sweep = root / "sweep"
    for placement, rate in RATES.items():
        for seed in (1, 2, 3):
            hyps = {"test": degrade(splits["test"][1], rate, seed=seed * 7)}
            write_cell(sweep, f"placement={placement},seed={seed}", corpus, splits, hyps, placement=placement,
                       seed=seed)
    write_plan(sweep, {"placement": "both,source,none", "seed": "1,2,3"}, ["experiment=table4"])
    return sweep


def table_lines(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_compact_table_is_one_line_per_row_within_100_columns(sweep):
    text = compact_table(sweep_end_report(read_sweep(sweep)))
    assert all(len(line) <= WIDTH for line in text.splitlines()), text
    header, rule, *body = table_lines(text)
    assert [c.strip() for c in header.strip("|").split("|")] == ["row", "BLEU", "Δ [CI]", "paper Δ", "verdict",
                                                                 "seeds"]
    cells = {c[0]: c for c in ([x.strip() for x in line.strip("|").split("|")] for line in body)}
    assert list(cells) == ["placement=both", "placement=source", "placement=none"]
    assert cells["placement=both"][2:5] == ["baseline", "-", "baseline"]
    assert cells["placement=none"][4] == "worse" and cells["placement=none"][5] == "3"
    assert cells["placement=none"][2].startswith("-") and "*" in cells["placement=none"][2]
    assert " ± " in cells["placement=none"][1] and "[" in cells["placement=none"][2]
    assert cells["placement=source"][4] == "no evidence"
    # The paper's own Δ beside ours (Table 4: source 21.5 - 21.7, none 21.2 - 21.7), the caption naming it
    paper = {key: float(row["bleu"]) for key, row in convs2s_rows().items()}
    for placement in ("source", "none"):
        assert float(cells[f"placement={placement}"][3]) == pytest.approx(paper[placement] - paper["both"])
    lines = text.splitlines()
    assert lines[0].endswith("Δ against placement=both [95% CI], * where the verdict is better/worse")
    assert lines[1] == "paper Δ: Gehring et al. (2017) Table 4, tokenized BLEU on WMT'14 En-De newstest2014"


def convs2s_rows() -> dict:
    import csv

    from posenc.report.references import CONVS2S

    with open(CONVS2S, newline="") as handle:
        return {row["placement"]: row for row in csv.DictReader(handle)}


def test_a_sweep_without_a_papers_numbers_has_no_paper_column(sweep, tmp_path):
    """Sinusoids in fconv: no paper measured that comparison, so no column and no caption line."""
    import json
    import shutil

    copy = tmp_path / "sinusoidal"
    shutil.copytree(sweep, copy)
    for result in copy.glob("*/result.json"):
        result.write_text(json.dumps({**json.loads(result.read_text()), "pe": "sinusoidal"}))
    text = compact_table(sweep_end_report(read_sweep(copy)))
    header = table_lines(text)[0]
    assert [c.strip() for c in header.strip("|").split("|")] == ["row", "BLEU", "Δ [CI]", "verdict", "seeds"]
    assert "paper" not in text and all(len(line) <= WIDTH for line in text.splitlines())



def test_every_paper_a_row_can_cite_has_a_caption():
    from posenc.report.references import CAPTIONS, SOURCES

    assert set(CAPTIONS) == set(SOURCES)
    assert all(len(f"paper Δ: {text}") <= WIDTH for text in CAPTIONS.values())


def test_long_cells_are_cut_to_fit():
    headers = ["row", "BLEU", "Δ [CI]", "verdict", "seeds"]
    body = [["model.args.dropout=0.1 optim.args.lr=0.002 pe=sinusoidal placement=source", "23.41 ± 0.52",
             "-2.31 [-3.40, -1.22]*", "n/a: no seed in common with the baseline, whatever else", "3, 1 not ok"]]
    widths = fit(headers, body)
    assert sum(widths) + 3 * 4 + 4 <= WIDTH
    assert widths[1:3] == [12, 21] and widths[4] == len("3, 1 not ok")   # numbers are never cut while labels can be
    # Numbers alone wider than the line: every column gives way, the line still fits.
    wide = [["placement=source", "100.00 ± 10.00", "+12.34* [+10.00, +14.00]", "n/a: no seed in common",
             "3 (2 time-capped), 1 not ok" + " and more" * 3]]
    assert sum(fit(headers, wide)) + 3 * 4 + 4 <= WIDTH


def kinds_report(keys: dict, placements=("both", "source", "target", "none")):
    """A report-shaped object: rows of a kinds/tune-like sweep whose varying keys are long."""
    rows = []
    for i, placement in enumerate(placements):
        for value in keys["values"]:
            identity = {"model": "transformer_small", "data": "synthetic", **dict(zip(keys["names"], value)),
                        "placement": placement}
            baseline = placement == "both"
            scores = RowScores({"test": SplitScores(bleu=MeanSd(31.234 - i, 0.512))}, seeds=[1, 2, 3])
            comparison = Comparison(p_note="baseline" if baseline else "", delta_bleu=None if baseline else -1.234 * i)
            verdict = Verdict(delta_ci_low=None if baseline else -2.5 * i, delta_ci_high=None if baseline else -0.1 * i,
                              verdict="n/a: baseline" if baseline else "worse" if i > 1 else
                              "n/a: the seeds' spread is unknown (one seed in common with the baseline, two needed)")
            rows.append(SimpleNamespace(identity=identity, scores=scores, comparisons={"test": comparison},
                                        verdicts={("bleu", "test"): verdict}, paper=PaperNumbers(),
                                        ok_cells=lambda: []))
    return SimpleNamespace(rows=rows, sweep=SimpleNamespace(strategy=None),
                           settings=SimpleNamespace(baseline=("placement", "both")))


def test_long_row_labels_stay_apart_and_every_line_fits():
    # A kinds sweep: pe and placement vary; the labels fit whole.
    kinds = compact_table(kinds_report({"names": ["pe"], "values": [["sinusoidal"], ["rope"], ["alibi"]]}))
    assert all(len(line) <= WIDTH for line in kinds.splitlines()), kinds
    assert "| pe=sinusoidal placement=source " in kinds and "| pe=alibi placement=none " in kinds
    assert "| n/a: the seeds'… " in kinds   # the long reason gives way first: cut, never wrapped
    # Two dotted keys: each by its last part, whole.
    dropout = compact_table(kinds_report({"names": ["+model.args.dropout"], "values": [["0.1"], ["0.3"]]}))
    assert "| dropout=0.3 placement=source " in dropout and "…" not in table_lines(dropout)[2], dropout
    # Too many keys for that: the values alone, the keys named once above the table; no two rows alike.
    names = ["+model.args.attention_dropout", "optim.args.lr", "pe"]
    values = [["0.1", "0.0005", "sinusoidal"], ["0.1", "0.001", "rope"], ["0.3", "0.0005", "sinusoidal"]]
    text = compact_table(kinds_report({"names": names, "values": values}))
    lines = table_lines(text)[2:]
    assert all(len(line) <= WIDTH for line in text.splitlines()), text
    assert "row: +model.args.attention_dropout optim.args.lr pe placement" in text.splitlines()[:3], text
    assert len(lines) == 12 and len({line.split("|")[1] for line in lines}) == 12, text
    assert "| 0.3 0.0005 sinusoidal none " in text, text


def test_a_sweep_without_a_comparison_shows_no_baseline_and_a_failed_row_as_failed():
    """A sweep over dropout alone: every row has placement=both, so each is its own group's baseline
    with nothing compared; no row is called the baseline, the caption says why there is no Δ. A
    row with no finished seed is failed, never a baseline."""
    report = kinds_report({"names": ["+model.args.dropout"], "values": [["0.1"], ["1.5"]]}, placements=("both",))
    report.rows[1].scores = RowScores({}, seeds=[], not_ok=["seed 1 failed"])
    text = compact_table(report)
    cells = [[x.strip() for x in line.strip("|").split("|")] for line in table_lines(text)[2:]]
    assert cells[0][2:4] == ["-", "-"] and cells[1][2:4] == ["-", "failed"], text
    assert "baseline" not in "".join(table_lines(text)) and "Δ against" not in text
    assert text.splitlines()[0] == ("BLEU: mean ± sd over seeds; no Δ: no two rows differ in placement alone "
                                    "(see --baseline)")
    # Beside other placements the placement=both row is the baseline again; a failed row still says so.
    report = kinds_report({"names": ["+model.args.dropout"], "values": [["0.1"]]}, placements=("both", "none"))
    report.rows[1].scores = RowScores({}, seeds=[], not_ok=["seed 1 failed", "seed 2 interrupted"])
    cells = [[x.strip() for x in line.strip("|").split("|")] for line in table_lines(compact_table(report))[2:]]
    assert cells[0][2:4] == ["baseline", "baseline"] and cells[1][2:4] == ["-", "failed, interrupted"]


def sequential_state():
    """A seeds strategy's state: none stopped for efficacy at its 3-seed pilot, source between looks."""
    design = Design()
    threshold = design.thresholds(design.alpha / 2)[3]
    look = Look(3, -25.0, 0.6, 2.0, 0.0009, threshold=threshold, cond_power=1.0, level=design.alpha / 2)
    rows = [SeedsRow("placement=both", ["placement=both"], baseline=True, seeds=[1, 2, 3],
                     why="runs while any of its rows runs"),
            SeedsRow("placement=none", ["placement=none"], seeds=[1, 2, 3], stopped="efficacy",
                     why="efficacy at 3 seeds", verdict="worse", looks=[look],
                     ci=list(repeated_ci(look, threshold)), level=design.alpha / 2),
            SeedsRow("placement=source", ["placement=source"], seeds=[1, 2, 3],
                     looks=[Look(3, 0.2, 0.6, 2.0, 0.75, threshold=threshold, cond_power=0.4)])]
    settings = {"alpha": 0.05, "pilot_seeds": 3, "max_seeds": 10, "spending": "hsd", "gamma": -2.0, "futility": 0.1,
                "futility_from": 5, "effect": 1.0, "test_size": None, "baseline": "placement=both", "batch_seeds": 2}
    cells = [StateCell(f"placement={p},seed={s}", [f"placement={p}", f"seed={s}"])
             for p in ("both", "none", "source") for s in (1, 2, 3)]
    return SeedsState(SeedsSettings.of(settings), rows, cells)


def test_a_decided_row_books_no_seeds_and_says_where_it_stopped(sweep):
    fixed = sweep_end_report(read_sweep(sweep))
    # Without a sequential design the row gets a plan as before (here: unreachable on 60 sentences).
    assert next(r for r in fixed.rows if r.identity["placement"] == "none").values["seeds_needed"] is not None
    read = read_sweep(sweep)
    read.strategy = sequential_state()
    report = sweep_end_report(read)
    none, source = (next(r for r in report.rows if r.identity["placement"] == p).values for p in ("none", "source"))
    assert none["seeds_needed"] is None and none["seeds_needed_low"] is None and not none.get("power_advice")
    assert source["seeds_needed"] is not None   # still between looks: planned as before
    table = render_reports([report])
    power = table[table.index("| pilot seeds |") - 200:]
    assert "| none: decided (worse: efficacy at 3 seeds) | - |" in power
    assert "A row its sequential design has stopped books none" in table
    compact = compact_table(report)
    assert all(len(line) <= WIDTH for line in compact.splitlines()), compact
    # Where it stopped: in the stop, or (the paper's Δ and the CI's level taking the room) in the seeds column
    assert re.search(r"\| worse: efficacy( at 3 seeds)? +\| 3 +\|", compact), compact
    assert re.search(r"\| going on( after 3 seeds)? +\| 3 +\|", compact), compact
    assert "[CI: 95% or as marked]" in compact.splitlines()[0] and "] (97.5%) |" in compact
    assert "repeated CI at the look it stopped at" in compact


def test_the_sweep_end_prints_the_summary_then_the_compact_table_then_the_path(sweep, tmp_path, capsys):
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "logger": {"name": "none"}})
    SweepReport().on_multirun_end(config)
    lines = capsys.readouterr().out.rstrip("\n").splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("9 cells: 9 ok"))
    assert all(line.startswith("figure: ") for line in lines[:summary]) and summary == 3
    assert lines[-1] == f"Every table and note: {sweep / 'table.md'}"
    answer = lines[summary + 1:-1]
    assert all(len(line) <= WIDTH for line in answer), answer
    assert len(table_lines("\n".join(answer))) == 2 + 3 and "| placement=none " in "\n".join(answer)
    full = (sweep / "table.md").read_text()
    assert "seeds to book" in full and "Primary question" in full   # every table and note, as before


def test_posenc_table_compact_and_its_refusals(sweep):
    out = subprocess.run([str(BIN / "posenc-table"), str(sweep), "--compact"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == compact_table(sweep_end_report(read_sweep(sweep)))
    both = subprocess.run([str(BIN / "posenc-table"), str(sweep), str(sweep), "--compact"], capture_output=True,
                          text=True)
    assert both.stdout.count(f"Sweep {sweep}") == 2 and all(len(x) <= WIDTH for x in both.stdout.splitlines())
    for flags in (["--format", "csv"], ["--power"], ["--trials"]):
        out = subprocess.run([str(BIN / "posenc-table"), str(sweep), "--compact", *flags], capture_output=True,
                             text=True)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--compact" in out.stderr, out.stderr


def test_a_strategys_sweep_is_compared_with_its_own_baseline_unless_told(sweep, tmp_path):
    """posenc-table on a seeds strategy's sweep whose baseline is not placement=both: by default its
    rows are compared with the strategy's baseline (as the sweep's end compared them); another
    --baseline or --primary is refused."""
    import shutil

    from posenc.cells.strategy import write_state

    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    state = sequential_state()
    state.settings = replace(state.settings, baseline="placement=source")
    for row in state.rows:
        row.baseline, row.stopped, row.why, row.verdict, row.looks = (row.row == "placement=source", "", "", "", [])
    write_state(copy, state)
    own = subprocess.run([str(BIN / "posenc-table"), str(copy), "--compact"], capture_output=True, text=True)
    assert own.returncode == 0, own.stderr
    assert "Δ against placement=source [95% CI]" in own.stdout.splitlines()[0]
    rows = {line.split("|")[1].strip(): line for line in table_lines(own.stdout)[2:]}
    assert "| baseline " in rows["placement=source"] and "| baseline " not in rows["placement=both"]
    # Another baseline, or another primary, would test seeds the design's looks chose at a fixed
    # sample: refused in one line (issue 49); the design's own baseline named is what it ran.
    for flags, words in ((["--baseline", "placement=both"], "against placement=source; allowed: --baseline "
                          "placement=source"), (["--primary", "chrf"], "allowed: --primary bleu")):
        told = subprocess.run([str(BIN / "posenc-table"), str(copy), "--compact", *flags], capture_output=True,
                              text=True)
        assert told.returncode == 2 and told.stderr.count("\n") == 1 and words in told.stderr, told.stderr
        assert told.stderr.startswith(f"posenc-table: error: {flags[0]} {flags[1]}: ") and not told.stdout
    same = subprocess.run([str(BIN / "posenc-table"), str(copy), "--compact", "--baseline", "placement=source"],
                          capture_output=True, text=True)
    assert same.returncode == 0 and same.stdout == own.stdout


def test_where_and_why_a_sequential_row_stopped_in_a_few_words():
    def look(n):
        return Look(n, 0.1, 0.5, n - 1.0, 0.8)

    assert short_stop(SeedsRow("r", ["r"], stopped="max_seeds", why="max_seeds", verdict="no evidence",
                               looks=[look(3), look(10)])) == "no evidence: max_seeds at 10 seeds"
    assert short_stop(SeedsRow("r", ["r"], stopped="futility", why="futility at 5 seeds: conditional power 0.04",
                               verdict="no evidence", looks=[look(5)])) == "no evidence: futility at 5 seeds"
    assert short_stop(SeedsRow("r", ["r"], looks=[look(3)])) == "going on after 3 seeds"
