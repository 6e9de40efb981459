"""posenc-pe sinusoidal: report.json contract keys, figures, report.md, and argument errors."""

import json
import math

import pytest

from pe_cli_helpers import run_cli
from posenc.analysis.cli import main

CONTRACT_KEYS = ("relative_linear_max_error", "norm_mean", "norm_std", "translation_invariance", "monotonicity",
                 "symmetry")
FIGURES = ("pe_heatmap.png", "pe_dimensions.png", "wavelengths.png", "scale.png", "proximity.png",
           "relative_error.png")


@pytest.fixture(scope="module")
def sinusoid_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("pe") / "out"  # does not exist yet: the CLI creates it
    assert main(["sinusoidal", "--dim", "16", "--max-len", "40", "--out", str(out), "--folds", "2"]) == 0
    return out


def test_report_json_has_contract_keys_for_the_chosen_variant(sinusoid_out):
    report = json.loads((sinusoid_out / "report.json").read_text())
    for key in CONTRACT_KEYS:
        assert isinstance(report[key], float), key
    assert report["variant"] == "paper" and report["dim"] == 16 and report["max_len"] == 40
    assert report["relative_linear_max_error"] < 1e-10
    assert abs(report["norm_mean"] - math.sqrt(8)) < 1e-12 and report["norm_std"] < 1e-12
    assert abs(report["translation_invariance"] - 1) < 1e-12 and abs(report["symmetry"] - 1) < 1e-12
    assert set(report["variants"]) == {"paper", "fairseq"}
    paper = report["variants"]["paper"]
    assert report["relative_linear_max_error"] == paper["relative"]["max_error_float64"]
    assert report["monotonicity"] == paper["properties"]["monotonicity"]
    assert paper["relative"]["pairs_checked"] == 40 * 41 // 2
    assert len(paper["values"]["wavelengths"]) == 16
    assert report["variants"]["fairseq"]["values"]["wavelength_max"] == pytest.approx(2 * math.pi * 10000)


def test_figures_and_markdown_written(sinusoid_out):
    report = json.loads((sinusoid_out / "report.json").read_text())
    assert sorted(report["figures"]) == sorted(FIGURES)
    md = (sinusoid_out / "report.md").read_text()
    for name in FIGURES:
        assert (sinusoid_out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({name})" in md
    assert "d=16, N=40" in md


def test_variant_fairseq_at_top_level(tmp_path, capsys):
    rc, out, err = run_cli(["sinusoidal", "--dim", "8", "--max-len", "12", "--variant", "fairseq", "--no-probes",
                            "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["variant"] == "fairseq"
    fq = report["variants"]["fairseq"]
    assert report["relative_linear_max_error"] == fq["relative"]["max_error_float64"]
    assert report["symmetry"] == fq["properties"]["symmetry"]
    assert "probes" not in fq


@pytest.mark.parametrize("argv, message", [
    (["--dim", "7", "--max-len", "10"], "posenc-pe: error: --dim must be even and at least 4, got 7"),
    (["--dim", "2", "--max-len", "10"], "posenc-pe: error: --dim must be even and at least 4, got 2"),
    (["--dim", "8", "--max-len", "1"], "posenc-pe: error: --max-len must be at least 2, got 1"),
    (["--dim", "8", "--max-len", "10", "--variant", "t2t"],
     "posenc-pe: error: unknown --variant 't2t'; allowed: paper, fairseq"),
])
def test_bad_arguments_give_one_line(argv, message, tmp_path, capsys):
    rc, out, err = run_cli(["sinusoidal", *argv, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2
    assert err.splitlines() == [message]
    assert not (tmp_path / "o").exists()


def test_argparse_errors_are_one_line(capsys):
    rc, _, err = run_cli(["sinusoidal", "--dim", "x", "--max-len", "3", "--out", "o"], capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "invalid int value" in err
    rc, _, err = run_cli([], capsys)
    assert rc == 2 and len(err.splitlines()) == 1


def test_help_says_whose_exercises_it_works_through(capsys):
    """"Exercises 3.1-3.3" alone names nothing a reader has: the help says they are the seed note's
    and what each one is."""
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exercises 3.1-3.3 of the note on position embeddings that posenc grew from" in text
    assert all(part in text for part in ("3.1 relative positions", "3.2 the values", "3.3 the scale"))
