"""Running ``posenc-pe``'s main in-process, as a shell would see it."""

from posenc.analysis.cli import main


def run_cli(argv, capsys):
    """``(exit status, stdout, stderr)`` of ``posenc-pe ARGV``."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err
