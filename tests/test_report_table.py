"""posenc-table on hand-made sweeps: significance and its footnote, untestable rows, failed,
interrupted, missing and unreadable cells, the length and long-split columns, paper columns only
where they apply, several sweeps side by side, the formats, the figures."""

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from sacrebleu.metrics import BLEU

from posenc.cells.sweep import read_sweep
from posenc.report.render import delta_cell, p_cell
from posenc.report.rows import Settings
from posenc.report.scores import Interval
from posenc.report.stats import Comparison, Verdict
from posenc.report.table import report_text, sweep_end_report, table_rows, write_sweep_files
from report_fixtures import cli_p_value, degrade, synthetic_test_sets, write_cell, write_plan, write_testset

BIN = Path(sys.executable).parent
RATES = {"both": 0.1, "source": None, "target": 0.45, "none": 0.45}  # source: the same outputs as both


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    splits = synthetic_test_sets(test=60, test_long=40)
    return root, splits, write_testset(root / "cache", splits)


def hyps_for(splits, rate, seed):
    return {s: degrade(refs, rate * (1.5 if s == "test_long" else 1), seed=seed * 7 + i)
            for i, (s, (_, refs)) in enumerate(splits.items())}


@pytest.fixture(scope="module")
def sweep(data):
    """fconv Table 4 with seeds 1, 2 (3 planned, never run); target seed 2 interrupted; none seed 2 torn."""
    root, splits, corpus = data
    sweep = root / "table4"
    for placement, rate in RATES.items():
        for seed in (1, 2):
            name = f"placement={placement},seed={seed}"
            hyps = hyps_for(splits, rate if rate is not None else RATES["both"], seed)
            if placement == "none" and seed == 2:
                (sweep / name).mkdir(parents=True)
                (sweep / name / "result.json").write_text('{"placement": "none", "bl')  # torn mid-write
                continue
            status = "interrupted" if (placement, seed) == ("target", 2) else "ok"
            write_cell(sweep, name, corpus, splits, hyps, status=status, placement=placement, seed=seed)
    write_plan(sweep, {"placement": "both,source,target,none", "seed": "1,2,3"}, ["experiment=table4"])
    return sweep


def row(text, label):
    lines = [line for line in text.splitlines() if f"| {label} |" in line]
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_scores_significance_and_status_are_all_visible(sweep):
    text = report_text([sweep])
    headers = row(text, "position embeddings")
    labels = ("both (encoder and decoder)", "source (encoder) only", "target (decoder) only", "neither")
    both, source, target, none = (dict(zip(headers, row(text, label))) for label in labels)
    assert both["verdict (primary)"] == "baseline" and both["Δ BLEU"] == "-"
    # identical outputs: nothing to find, by either test
    assert source["Δ BLEU"] == "+0.00" and float(source["p sentences only"]) >= 0.5
    assert source["verdict (primary)"] == "no evidence" and float(source["p seeds (Holm)"]) >= 0.5
    # clearly worse over these sentences, but one paired seed says nothing about another seed
    assert float(target["p sentences only"]) < 0.05 and target["verdict (primary)"].startswith("n/a: one paired seed")
    assert float(target["Δ BLEU"]) < -10 and target["seeds ok"] == "1" and target["not ok"] == "1"
    assert none["BLEU 95% CI"].endswith("†")                                    # one seed: bootstrap CI
    assert re.fullmatch(r"\[\d+\.\d\d, \d+\.\d\d\]", both["BLEU 95% CI"])
    assert "paired bootstrap resampling" in text and "1000 resamples" in text and "seed:12345" in text
    assert "seed s against the baseline's seed s" in text
    assert "INTERRUPTED placement=target,seed=2" in text
    assert "UNREADABLE placement=none,seed=2/result.json: JSONDecodeError" in text
    for placement in RATES:
        assert f"MISSING placement={placement},seed=3: planned, never reported" in text
    assert "MISSING placement=none,seed=2" not in text  # it reported, unreadably: listed once, as such


def test_length_buckets_and_long_split_columns(sweep, data):
    _, splits, _ = data
    text = report_text([sweep])
    headers = row(text, "position embeddings")  # the first table's header
    length_headers = [line for line in text.splitlines() if "BLEU 1-8" in line][0]
    for column in ("BLEU 1-8", "BLEU 9-12", "BLEU 13+", "BLEU long split", "Δ long", "verdict long",
                   "p long sentences only", "chrF++ long"):
        assert column in length_headers
    assert "BLEU long split" not in headers
    sizes = re.search(r"1-8 (\d+), 9-12 (\d+), 13\+ (\d+)", text).groups()
    assert sum(map(int, sizes)) == len(splits["test"][0])
    custom = report_text([sweep], Settings(edges=(5, 10, 15, 20)))
    assert "BLEU 21+" in custom and "edges 5,10,15,20" in custom


def test_p_value_of_several_seeds_is_the_cli_on_the_concatenated_outputs(sweep, data, tmp_path):
    _, splits, _ = data
    refs = splits["test"][1]
    rows = {r["placement"]: r for r in table_rows(sweep, Settings(resamples=300))}
    # source vs both pairs seeds 1 and 2; make it a real difference by testing target's seed-1 pairing too
    base = (sweep / "placement=both,seed=1" / "hypotheses.txt").read_text().splitlines()
    system = (sweep / "placement=target,seed=1" / "hypotheses.txt").read_text().splitlines()
    assert rows["target"]["paired_seeds"] == 1
    assert rows["target"]["p_value"] == pytest.approx(cli_p_value(tmp_path, refs, base, system, "--paired-bs", 300))


def test_two_seeds_are_tested_as_one_concatenated_output(data, tmp_path):
    root, splits, corpus = data
    sweep = tmp_path / "two"
    for placement, rate in (("both", 0.2), ("none", 0.22)):
        for seed in (1, 2):
            write_cell(sweep, f"placement={placement},seed={seed}", corpus, splits,
                       hyps_for({"test": splits["test"]}, rate, seed + (placement == "none")), placement=placement,
                       seed=seed)
    rows = {r["placement"]: r for r in table_rows(sweep, Settings(test="ar", resamples=500))}
    refs = splits["test"][1] * 2
    lines = {p: [x for s in (1, 2)
                 for x in (sweep / f"placement={p},seed={s}" / "hypotheses.txt").read_text().splitlines()]
             for p in ("both", "none")}
    expected = cli_p_value(tmp_path, refs, lines["both"], lines["none"], "--paired-ar", 500)
    assert rows["none"]["paired_seeds"] == 2 and rows["none"]["p_value"] == pytest.approx(expected)
    assert 1 / 501 < expected < 1
    # The difference the test is about: sacreBLEU's BLEU of the concatenated outputs, beside Δ (mean over seeds).
    tested = BLEU().corpus_score(lines["none"], [refs]).score - BLEU().corpus_score(lines["both"], [refs]).score
    assert rows["none"]["delta_bleu_tested"] == pytest.approx(tested, abs=1e-9)
    assert rows["none"]["delta_bleu"] == pytest.approx(rows["none"]["bleu"] - rows["both"]["bleu"], abs=0.006)


def test_the_star_follows_the_verdict_not_the_sentence_only_p():
    # sacreBLEU's p is shown as a number only, whatever it is and whatever the signs
    def row(verdict=None, split="test", metric="bleu", **comparison):
        return SimpleNamespace(comparisons={split: Comparison(**comparison)},
                               verdicts={(metric, split): Verdict(verdict=verdict)})
    assert p_cell(row(p_value=0.01, delta_bleu=0.2, delta_bleu_tested=-0.1)) == "0.0100"
    assert p_cell(row(split="test_long", p_value=0.2), "test_long") == "0.2000" and p_cell(row()) == "-"
    assert delta_cell(row("no evidence", delta_bleu=-0.44, p_value=0.01)) == "-0.44"
    assert delta_cell(row("better", delta_bleu=2.5, p_value=0.4)) == "+2.50*"
    assert delta_cell(row("worse", "test_long", "chrf", delta_chrf=-3.0), "chrf", "test_long") == "-3.00*"


def test_rows_that_cannot_be_tested_say_why(data, tmp_path):
    root, splits, corpus = data
    other = write_testset(root / "cache", splits, name="synthetic", key="cd" * 32)
    sweep = tmp_path / "untestable"
    hyps = hyps_for(splits, 0.2, 1)
    write_cell(sweep, "placement=both,seed=1", corpus, splits, hyps, placement="both")
    write_cell(sweep, "placement=source,seed=1", corpus, splits, hyps, placement="source")
    (sweep / "placement=source,seed=1" / "hypotheses.txt").unlink()
    write_cell(sweep, "placement=target,seed=1", other, splits, hyps, placement="target")
    write_cell(sweep, "placement=none,seed=1", corpus, splits, hyps, placement="none", status="failed")
    write_cell(sweep, "pe=sinusoidal,placement=none,seed=1", corpus, splits, hyps, placement="none", pe="sinusoidal")
    text = report_text([sweep])
    assert "n/a: hypotheses file missing (hypotheses.txt)" in row(text, "source (encoder) only")
    assert "n/a: other test set than the baseline" in row(text, "target (decoder) only")
    rows = {(r["pe"], r["placement"]): r for r in table_rows(sweep)}
    assert rows[("learned", "none")]["p_note"] == "no finished seed"
    assert rows[("learned", "none")]["not_ok"] == "seed 1 failed"
    assert rows[("sinusoidal", "none")]["p_note"] == "no baseline row (placement=both)"
    assert "FAILED placement=none,seed=1: boom" in text
    assert "n/a: no finished seed" in text and "n/a: no baseline row (placement=both)" in text


def test_cells_cut_short_by_the_time_cap_are_flagged(data, tmp_path):
    """A cell whose training stopped at budget.max_time_min is finished but not whole: the table
    says so in its row and names it below, and the CSV lists its seed."""
    root, splits, corpus = data
    sweep = tmp_path / "capped"
    for seed in (1, 2):
        write_cell(sweep, f"placement=both,seed={seed}", corpus, splits, hyps_for(splits, 0.1, seed), seed=seed,
                   stopped_by="time_cap" if seed == 2 else "max_epoch", num_updates=150 if seed == 2 else 218, epochs=2)
        write_cell(sweep, f"placement=none,seed={seed}", corpus, splits, hyps_for(splits, 0.3, seed), seed=seed,
                   placement="none", stopped_by="max_epoch")
    text = report_text([sweep])
    headers = row(text, "position embeddings")
    assert dict(zip(headers, row(text, "both (encoder and decoder)")))["seeds ok"] == "2 (1 time-capped)"
    assert dict(zip(headers, row(text, "neither")))["seeds ok"] == "2"
    assert ("TIME-CAPPED placement=both,seed=2: training stopped at budget.max_time_min after 150 updates, "
            "in epoch 2") in text
    assert "placement=both,seed=1:" not in text and "TIME-CAPPED placement=none" not in text
    rows = {r["placement"]: r for r in table_rows(sweep)}
    assert rows["both"]["time_capped"] == "2" and rows["none"]["time_capped"] == ""


def test_cells_resumed_inexactly_are_flagged(data, tmp_path):
    """A cell resumed without its random states (a version before exact resume: no ``resume_exact``
    in its record) is close to an uninterrupted one, not equal: its row and a line below say so."""
    root, splits, corpus = data
    sweep = tmp_path / "resumed"
    resumes = {1: {"resumed_from_update": 109}, 2: {"resumed_from_update": 109, "resume_exact": True},
               3: {"resumed_from_update": 0},
               4: {"resumed_from_update": 60, "resume_exact": False,
                   "resume_inexact_reason": "update 60: saved on cpu, resumed on cuda"}}
    for seed, how in resumes.items():
        write_cell(sweep, f"placement=both,seed={seed}", corpus, splits, hyps_for(splits, 0.1, seed), seed=seed, **how)
        write_cell(sweep, f"placement=none,seed={seed}", corpus, splits, hyps_for(splits, 0.3, seed), seed=seed,
                   placement="none")
    text = report_text([sweep])
    headers = row(text, "position embeddings")
    assert dict(zip(headers, row(text, "both (encoder and decoder)")))["seeds ok"] == "4 (2 resumed inexactly)"
    assert dict(zip(headers, row(text, "neither")))["seeds ok"] == "4"
    assert "RESUMED INEXACTLY placement=both,seed=1: resumed from update 109 without" in text
    assert ("RESUMED INEXACTLY placement=both,seed=4: resumed from update 60 inexactly (update 60: saved on cpu, "
            "resumed on cuda)") in text
    assert "redo=inexact" in text and "placement=both,seed=2:" not in text
    rows = {r["placement"]: r for r in table_rows(sweep)}
    assert rows["both"]["resumed_inexactly"] == "1; 4" and rows["none"]["resumed_inexactly"] == ""


def test_a_record_without_its_corpus_is_untestable_not_an_error(data, tmp_path):
    root, splits, corpus = data
    sweep = tmp_path / "nocorpus"
    hyps = hyps_for(splits, 0.2, 1)
    write_cell(sweep, "placement=both,seed=1", corpus, splits, hyps)
    write_cell(sweep, "placement=none,seed=1", {"name": "synthetic", "cache_key": "ef" * 32}, splits, hyps,
               placement="none")
    rows = {r["placement"]: r for r in table_rows(sweep)}
    assert rows["none"]["p_note"].startswith("test set of corpus synthetic-efefefef not found")
    assert rows["none"]["bleu"] is not None and rows["none"]["delta_bleu"] == pytest.approx(0.0)


def test_paper_columns_only_where_they_apply(data, tmp_path):
    root, splits, corpus = data
    hyps = hyps_for({"test": splits["test"]}, 0.2, 1)
    fconv, transformer = tmp_path / "fconv", tmp_path / "transformer"
    for pe in ("learned", "sinusoidal"):
        for placement in ("both", "none"):
            write_cell(fconv, f"pe={pe},placement={placement}", corpus, splits, hyps, pe=pe, placement=placement)
            write_cell(transformer, f"pe={pe},placement={placement}", corpus, splits, hyps, pe=pe, placement=placement,
                       model="transformer_small")
    tsin = tmp_path / "transformer_sinusoidal"
    for placement in ("both", "source", "target", "none"):
        write_cell(tsin, f"placement={placement}", corpus, splits, hyps, pe="sinusoidal", placement=placement,
                   model="transformer_small")
    paper = {(r["model"], r["pe"], r["placement"]): (r["paper_source"], r["paper_ppl"], r["paper_bleu"])
             for d in (fconv, transformer) for r in table_rows(d)}
    assert paper[("fconv_small", "learned", "both")] == ("G17", "6.64", "21.7")
    assert paper[("fconv_small", "learned", "none")] == ("G17", "6.68", "21.2")
    assert paper[("fconv_small", "sinusoidal", "both")] == ("", "", "")
    assert paper[("transformer_small", "learned", "both")] == ("V17", "4.92", "25.7")
    assert paper[("transformer_small", "sinusoidal", "both")] == ("V17", "4.92", "25.8")
    assert paper[("transformer_small", "learned", "none")] == ("", "", "")
    assert all(source != "G17" for (model, _, _), (source, _, _) in paper.items() if model.startswith("transformer"))
    # A Transformer sweep that does not compare learned with sinusoidal: no paper number at all
    assert {(r["paper_source"], r["paper_ppl"], r["paper_bleu"]) for r in table_rows(tsin)} == {("", "", "")}
    text = report_text([tsin])
    for label in ("both (encoder and decoder)", "source (encoder) only", "target (decoder) only", "neither"):
        cells = row(text, label)
        assert cells[4] == "-" and "21.7" not in cells and "6.64" not in cells
    assert "G17 beside fconv rows with learned positions" in text
    # The paper's own Δ for the same comparison (Table 4: none - both = 21.2 - 21.7), never its absolute BLEU
    deltas = {(r["pe"], r["placement"]): r["paper_delta"] for r in table_rows(fconv)}
    assert deltas == {("learned", "both"): None, ("learned", "none"): -0.5, ("sinusoidal", "both"): None,
                      ("sinusoidal", "none"): None}
    assert row(report_text([fconv]), "neither")[4] == "-0.5"


def test_latex_is_balanced_and_escaped(sweep):
    text = report_text([sweep], fmt="latex")
    assert text.count(r"\begin{tabular}") == text.count(r"\end{tabular}") == 2
    for block in re.findall(r"\\begin\{tabular\}\{(\w+)\}(.*?)\\end\{tabular\}", text, re.S):
        spec, body = block
        lines = [line for line in body.strip().splitlines() if line.endswith(r"\\")]
        assert lines and all(len(re.findall(r"(?<!\\)&", line)) == len(spec) - 1 for line in lines)
    braces = re.sub(r"\\[{}]", "", text)
    assert braces.count("{") == braces.count("}")
    assert "fconv\\_small" in text and "±" not in text and "Δ" not in text and "†" not in text
    assert not re.search(r"(?<!\\)_", "\n".join(line for line in text.splitlines() if not line.startswith("%")))


def test_several_sweeps_side_by_side(sweep, data, tmp_path):
    root, splits, corpus = data
    other = tmp_path / "table4_transformer"
    for placement, rate in (("both", 0.1), ("source", 0.15), ("target", 0.5), ("none", 0.5)):
        write_cell(other, f"placement={placement},seed=1", corpus, splits, hyps_for(splits, rate, 3),
                   placement=placement, model="transformer_small", pe="sinusoidal")
    text = report_text([sweep, other])
    header = [line for line in text.splitlines() if line.startswith("| position embeddings")][0]
    assert "table4 BLEU" in header and "table4 Δ" in header and "table4_transformer verdict" in header
    assert "table4_transformer BLEU long" in header
    first = row(text, "target (decoder) only")  # the side-by-side table comes first
    assert len(first) == header.count("|") - 1 and first[3].startswith("n/a: one paired seed")
    assert first[7].startswith("n/a: one paired seed") and float(first[6]) < -10
    assert "### Sweep" in text and text.count("| model | pe | data |") == 4
    text = report_text([sweep, other], fmt="csv")
    rows = csv.DictReader(io.StringIO("".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))))
    assert {r["sweep"] for r in rows} == {"table4", "table4_transformer"}


def test_rows_are_plain_dicts_for_other_consumers(sweep):
    rows = table_rows(sweep)
    json.dumps(rows)  # W&B tables and CSV take them as they are
    assert [r["placement"] for r in rows] == ["both", "source", "target", "none"]
    assert {"bleu", "bleu_sd", "bleu_ci_low", "delta_bleu", "p_value", "bleu_test_long", "bleu_len_1-8"} <= set(rows[0])


def test_a_rows_columns_are_read_from_its_typed_fields_and_cannot_be_written_past_them(sweep):
    """``TableRow.values`` flattens the typed fields; a write into it would be lost, so it is refused."""
    report = sweep_end_report(read_sweep(sweep))
    row = report.rows[1]
    assert row.values["bleu"] == row.scores.split("test").bleu.mean
    assert row.values["delta_bleu"] == row.comparisons["test"].delta_bleu
    with pytest.raises(TypeError):
        row.values["bleu"] = 0.0


def test_swept_keys_beyond_the_record_are_row_keys(data, tmp_path):
    root, splits, corpus = data
    sweep = tmp_path / "dropout"
    for dropout, rate in (("0.1", 0.1), ("0.2", 0.3)):
        for placement in ("both", "none"):
            name = f"+model.args.dropout={dropout},placement={placement}"
            write_cell(sweep, name, corpus, splits, hyps_for(splits, rate + (placement == "none") * 0.05, 1),
                       placement=placement)
    write_plan(sweep, None, ["+model.args.dropout=0.1,0.2", "placement=both,none"])
    rows = table_rows(sweep)
    assert [(r["model.args.dropout"], r["placement"]) for r in rows] == [
        ("0.1", "both"), ("0.1", "none"), ("0.2", "both"), ("0.2", "none")]
    assert rows[1]["delta_bleu"] == pytest.approx(rows[1]["bleu"] - rows[0]["bleu"])
    against_dropout = table_rows(sweep, Settings(baseline=("model.args.dropout", "0.1")))
    assert [r["p_note"] for r in against_dropout if r["model.args.dropout"] == "0.1"] == ["baseline", "baseline"]


def posenc_table(*args):
    return subprocess.run([str(BIN / "posenc-table"), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_cli_baseline_formats_plots_and_errors(sweep, tmp_path):
    out = posenc_table(sweep, "--baseline", "placement=none", "--plots", tmp_path / "plots")
    assert out.returncode == 0, out.stderr
    assert "baseline" in row(out.stdout, "neither") and "n/a: baseline: cell" not in out.stdout
    assert "row minus its baseline (placement=none" in out.stdout
    for name in ("delta.png", "bleu.png", "bleu_by_length.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for args, message in (((sweep, "--baseline", "colour=red"), "colour is not a key of any row"),
                          ((sweep, "--baseline", "placement=sideways"), "no cell has placement=sideways"),
                          ((sweep, "--baseline", "placement"), "expected KEY=VALUE"),
                          ((sweep, "--buckets", "12,8"), "strictly increasing"),
                          ((tmp_path / "nope",), "no such sweep directory")):
        out = posenc_table(*args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    out = posenc_table(sweep, "--format", "csv")
    lines = [line + "\n" for line in out.stdout.splitlines() if not line.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("".join(lines))))
    assert len(rows) == 4 and float(rows[2]["p_value"]) < 0.05 and "# INTERRUPTED" in out.stdout


def test_sweep_end_writes_tables_and_figures(sweep, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(sweep, copy)
    report = sweep_end_report(read_sweep(copy))
    printed, figures = write_sweep_files(report)
    table = (copy / "table.md").read_text()
    assert "seeds to book" in table  # the sweep end plans seeds
    assert table in printed and "Δ BLEU" in table and "BLEU long split" in table and "BLEU 1-8" in table
    assert (copy / "results.csv").read_text().startswith("experiment,model,data,pe,placement")
    for name in ("delta.png", "bleu.png", "bleu_by_length.png"):
        assert (copy / name).stat().st_size > 1000
    assert sorted(figures) == sorted(copy / name for name in ("delta.png", "bleu.png", "bleu_by_length.png"))


def test_a_sweep_with_nothing_reported_yet_lists_its_plan(tmp_path):
    write_plan(tmp_path, {"placement": "both,none"}, ["experiment=table4"])
    out = posenc_table(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["No cell of this sweep has a readable result yet.",
                                       "MISSING placement=both: planned, never reported",
                                       "MISSING placement=none: planned, never reported"]


def test_sentence_statistics_are_cached_beside_each_output(data, tmp_path):
    root, splits, corpus = data
    sweep = tmp_path / "cached"
    for placement, rate in (("both", 0.1), ("none", 0.3)):
        write_cell(sweep, f"placement={placement}", corpus, splits, hyps_for(splits, rate, 1), placement=placement)
    first = table_rows(sweep)
    files = sorted(p.name for p in sweep.glob("*/.report-cache/*.npy"))
    assert len(files) == 8 and table_rows(sweep) == first   # BLEU and chrF++, test and long split, 2 cells
    for path in sweep.glob("*/.report-cache/*.npy"):
        path.write_bytes(b"not an array")  # a torn cache file is recomputed, never trusted
    assert table_rows(sweep) == first
    # Another output under the same name: another key, the old file goes
    write_cell(sweep, "placement=none", corpus, splits, hyps_for(splits, 0.35, 2), placement="none")
    again = {r["placement"]: r for r in table_rows(sweep)}
    assert again["none"]["bleu"] != first[1]["bleu"] and again["none"]["p_value"] is not None
    for metric in ("bleu", "chrf"):
        assert len(list((sweep / "placement=none" / ".report-cache").glob(f"hypotheses.txt.{metric}.*.npy"))) == 1


def test_the_report_leaves_the_users_matplotlib_backend_alone():
    """A notebook that imports the report keeps its own backend (no matplotlib.use behind its back)."""
    code = ("import matplotlib; matplotlib.use('svg'); import posenc.report.table, posenc.report.figures; "
            "print(matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "svg", out.stderr


def test_figures_draw_an_interval_that_misses_its_own_centre(sweep, tmp_path):
    """A one-seed row's bootstrap interval can lie above its mean (BLEU near 0, seen in a smoke
    sweep): the sweep's end must still draw its figures, not die in matplotlib's yerr check."""
    from posenc.report.figures import BLEU_FIGURE, DELTA_FIGURE, write_figures

    report = sweep_end_report(read_sweep(sweep))
    for row in report.rows:
        bleu = row.scores.split("test").bleu.mean
        if bleu is not None:
            row.scores.bleu_ci = Interval(bleu + 1, bleu + 2, row.scores.bleu_ci.kind)
        delta, verdict = row.comparisons["test"].delta_bleu, row.verdicts[("bleu", "test")]
        if delta is not None:
            verdict.delta_ci_low, verdict.delta_ci_high = delta + 1, delta + 2
    written = write_figures([report], tmp_path)
    for name in (DELTA_FIGURE, BLEU_FIGURE):
        assert (tmp_path / name).stat().st_size > 1000 and tmp_path / name in map(Path, written)


def test_the_table_says_what_trained_its_cells(data, tmp_path):
    """The records' ``device``, counted over the finished cells, is the table's provenance line."""
    root, splits, corpus = data
    sweep = tmp_path / "gpu"
    devices = {1: "cuda: NVIDIA H200 x1", 2: "cuda: NVIDIA H200 x1", 3: "cpu"}
    for seed, device in devices.items():
        write_cell(sweep, f"placement=both,seed={seed}", corpus, splits, hyps_for(splits, 0.1, seed),
                   placement="both", seed=seed, device=device)
    write_cell(sweep, "placement=both,seed=4", corpus, splits, hyps_for(splits, 0.1, 4), status="failed",
               placement="both", seed=4, device="cuda: NVIDIA A100 x1", error="out of memory")
    text = report_text([sweep])
    assert "Trained on: cpu (1 cell); cuda: NVIDIA H200 x1 (2 cells) (each cell's result.json: device;" in text
    assert "A100" not in text.split("Trained on:")[1].split("\n")[0]  # a failed cell trained nothing to report


def test_the_delta_figure_leaves_out_a_panel_that_compares_nothing(data, tmp_path):
    """A sweep of kinds with the kind as the baseline: placement=none trains one kind only (the
    others are skipped by design), so its panel holds its baseline row alone. The Δ figure draws the
    panels that compare something; with none, it is not written, and an earlier one is removed."""
    pytest.importorskip("matplotlib")
    from posenc.report.figures import BLEU_FIGURE, DELTA_FIGURE, LENGTH_FIGURE, delta_figure, write_figures
    from posenc.report.render import PLACEMENT_LABEL
    from posenc.report.table import reports_of

    root, splits, corpus = data
    sweep = tmp_path / "kinds"
    for pe, placement, rate in (("learned", "both", 0.1), ("sinusoidal", "both", 0.2), ("learned", "none", 0.4)):
        for seed in (1, 2):
            write_cell(sweep, f"pe={pe},placement={placement},seed={seed}", corpus, splits,
                       hyps_for(splits, rate, seed), pe=pe, placement=placement, seed=seed)
    write_plan(sweep, {"pe": "learned,sinusoidal", "placement": "both,none", "seed": "1,2"}, ["experiment=table4"],
               skip_impossible=True)
    by_kind, by_placement = (reports_of([read_sweep(sweep)], Settings(baseline=b))[0]
                             for b in (("pe", "learned"), ("placement", "both")))
    titles = [ax.get_title().splitlines()[0] for ax in delta_figure([by_kind]).axes if ax.get_visible()]
    assert titles == ["kinds: fconv_small synthetic both"]   # not the none panel, empty
    ticks = [[t.get_text() for t in ax.get_xticklabels()] for ax in delta_figure([by_placement]).axes
             if ax.get_visible()]
    assert ticks == [[PLACEMENT_LABEL["none"]]]   # learned: none against both; sinusoidal: its both only

    out = tmp_path / "figures"
    out.mkdir()
    (out / DELTA_FIGURE).write_bytes(b"an earlier sweep's figure")
    only_baselines = tmp_path / "one-kind"
    for seed in (1, 2):
        write_cell(only_baselines, f"pe=learned,placement=both,seed={seed}", corpus, splits,
                   hyps_for(splits, 0.1, seed), seed=seed)
    write_plan(only_baselines, {"pe": "learned", "seed": "1,2"}, ["experiment=table4", "placement=both"])
    (report,) = reports_of([read_sweep(only_baselines)], Settings(baseline=("pe", "learned")))
    assert delta_figure([report]) is None
    assert write_figures([report], out) == [out / BLEU_FIGURE, out / LENGTH_FIGURE]
    assert not (out / DELTA_FIGURE).exists()
