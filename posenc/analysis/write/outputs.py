"""What each ``posenc-pe`` command leaves in ``--out``. The figures come first, since
``report.json`` lists them and the Markdown links them."""

from posenc.analysis.write.bases_text import write_bases_text
from posenc.analysis.write.figures import bases_figures, checkpoint_figures, sinusoid_figures, sweep_figures
from posenc.analysis.write.report_files import write_json, write_markdown
from posenc.analysis.write.report_text import checkpoint_markdown, sinusoid_markdown
from posenc.analysis.write.sweep_text import write_sweep_text


def write_sinusoid(report: dict, extras: dict, out_dir: str) -> None:
    report["figures"] = sinusoid_figures(report, extras, out_dir)
    write_json(report, out_dir)
    write_markdown(sinusoid_markdown(report), out_dir)


def write_checkpoint(report: dict, extras: dict, out_dir: str) -> None:
    report["figures"] = checkpoint_figures(report, extras, out_dir)
    write_json(report, out_dir)
    write_markdown(checkpoint_markdown(report), out_dir)


def write_bases(report: dict, extras: dict, out_dir: str) -> None:
    report["figures"] = bases_figures(report, extras, out_dir)
    write_bases_text(report, out_dir)
    write_json(report, out_dir)


def write_sweep(report: dict, rows: list, extras: dict, columns: list, out_dir: str) -> None:
    report["figures"] = sweep_figures(report, rows, extras, out_dir)
    write_sweep_text(report, rows, columns, out_dir)
    write_json(report, out_dir)


__all__ = ["write_bases", "write_checkpoint", "write_sinusoid", "write_sweep"]
