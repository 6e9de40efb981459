"""The command-line tools' own parsers, run in-process on a page's command (no child process, no
work done): ``posenc-table``, ``posenc-pe``, fairseq's tools, ``wandb`` and ``sacrebleu``.

A page shows two kinds of command line. A concrete one (``posenc-table results/table4 --format
csv``) is parsed as the tool parses it; for ``posenc-table`` that includes the values its main
checks before it reads a sweep (``--baseline``, ``--buckets``, ``--effect``). A synopsis
(``[--format md|csv|latex]``, ``--effect D``) is first made concrete where it can be, brackets
dropped and each ``a|b`` alternative tried; where a placeholder is left (``SWEEP_DIR``, ``D``), or
the line is a fragment without the tool's positional argument (``posenc-table --format csv`` in a
sentence), each flag must be one of the tool's, and each value offered for a flag with fixed
choices one of them, as ``--help`` lists them."""

import contextlib
import functools
import io
import re
import sys
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "posenc" / "fairseq_plugin"
# SWEEP_DIR, D, OUTDIR, KEY=VALUE, CHECKPOINT.pt, DIR1: words a reader replaces.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:[.=,][\w.,=]*)?$")
REQUIRED = "the following arguments are required"  # argparse's words for a line cut short
USAGE_OPTION = re.compile(r"(--[\w-]+)(?: (\{[^}]*\}|[A-Z][\w.,=]*(?:\.\.\.)?))?")


class Parsed(Exception):
    """Raised in place of the work a tool would start: its command line was accepted."""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_quietly(function, *args):
    """``(accepted, error)``: call a tool's entry point, its output captured; an argparse exit or
    a non-zero return is a refusal, and its error is the last line it printed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = function(*args)
    except Parsed:
        return True, ""
    except SystemExit as exit_:
        status = exit_.code
    if not isinstance(status, int) or status == 0:  # a parser's namespace, or main's success
        return True, ""
    return False, last_line(err.getvalue()) or last_line(out.getvalue()) or f"exit status {status}"


def help_text(function, *args) -> str:
    """What a tool prints for ``--help`` (argparse's usage first, then every option)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        function(*args)
    return out.getvalue()


def usage_options(help_: str) -> dict:
    """``{flag: choices or None}`` of the flags in a ``--help``'s usage; choices only where fixed."""
    usage = " ".join(help_.split("\n\n", 1)[0].split())
    return {flag: (set(meta[1:-1].split(",")) if meta.startswith("{") else None)
            for flag, meta in USAGE_OPTION.findall(usage)}


def variants(args: list[str]) -> list[list[str]]:
    """A synopsis made concrete: brackets dropped, ``...`` dropped, and one command line per
    alternative of each ``a|b|c`` value (the others at their first)."""
    words = [w.strip("[]") for w in args]
    words = [w for w in words if w and w != "..." and not w.endswith("...]")]
    choices = [w.split("|") if "|" in w and not w.startswith("-") else [w] for w in words]
    if all(len(c) == 1 for c in choices):
        return [[c[0] for c in choices]]
    lines = {tuple(c[0] for c in choices)}
    for i, options in enumerate(choices):
        for option in options[1:]:
            lines.add(tuple(option if j == i else c[0] for j, c in enumerate(choices)))
    return [list(line) for line in sorted(lines)]


def placeholders(args: list[str]) -> bool:
    return any(PLACEHOLDER.match(w) for w in args)


def check_flags(tool: str, args: list[str], help_: str) -> str | None:
    """A synopsis or fragment: its flags are the tool's, its offered values among fixed choices."""
    options = usage_options(help_)
    for i, word in enumerate(args):
        flag = word.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        if flag not in options:
            return f"{tool} has no flag {flag}"
        offered = word.split("=", 1)[1] if "=" in word else (args[i + 1] if i + 1 < len(args) else "")
        if options[flag] and offered and not offered.startswith("-") and not PLACEHOLDER.match(offered):
            if offered not in options[flag]:
                return f"{tool} {flag} {offered}: not one of {{{','.join(sorted(options[flag]))}}}"
    return None


# -- posenc-table ------------------------------------------------------------------------------------


@functools.cache
def table_help() -> str:
    from posenc.report.cli import main
    return help_text(main, ["--help"])


def check_posenc_table(args: list[str], whole: bool = True) -> str | None:
    """``whole``: the line must be a command to type (a shell block); else it may be part of one."""
    for line in variants(args):
        why = None if placeholders(line) else table_parse(line)
        if placeholders(line) or (why and not whole and REQUIRED in why):
            why = check_flags("posenc-table", line, table_help())
        if why:
            return why
    return None


def table_parse(line: list[str]) -> str | None:
    """Everything ``posenc-table``'s main checks before it reads a sweep (flags, then the values
    of ``--baseline``, ``--buckets``, ``--effect``...): ``build_reports`` (or, with ``--trials``,
    ``read_sweep``) is where its work starts."""
    from posenc.report import cli

    with mock.patch.object(cli, "build_reports", side_effect=Parsed), \
            mock.patch.object(cli, "read_sweep", side_effect=Parsed):  # --trials reads its sweeps itself
        accepted, why = run_quietly(cli.main, line)
    return None if accepted else why


# -- posenc-pe ---------------------------------------------------------------------------------------


def check_posenc_pe(args: list[str], whole: bool = True) -> str | None:
    from posenc.analysis.cli import build_parser

    for line in variants(args):
        why = None
        if not placeholders(line):
            accepted, why = run_quietly(build_parser().parse_args, line)
            why = None if accepted else why
        if placeholders(line) or (why and not whole and REQUIRED in why):
            why = pe_flags(line)
        if why:
            return why
    return None


def pe_flags(line: list[str]) -> str | None:
    """A synopsis or fragment of ``posenc-pe``: a command it has, and that command's flags."""
    from posenc.analysis.cli import build_parser

    top = help_text(build_parser().parse_args, ["--help"])
    commands = set(re.search(r"\{([^}]*)\}", top).group(1).split(","))  # the usage's one choice group
    command = next((w for w in line if not w.startswith("-")), None)
    if command is None:
        return check_flags("posenc-pe", line, top)
    if command not in commands:
        return f"posenc-pe has no command {command} (it has: {', '.join(sorted(commands))})"
    return check_flags(f"posenc-pe {command}", line, help_text(build_parser().parse_args, [command, "--help"]))


# -- fairseq, wandb, sacrebleu -----------------------------------------------------------------------


def check_fairseq(tool: str, args: list[str]) -> str | None:
    """fairseq's own parser for the tool, with the plugin loaded from ``--user-dir`` (a page's
    ``/abs/path/posenc/fairseq_plugin`` stands for this checkout's, and a relative one is taken from
    the repository's root, as the pages mean it); a trailing ``...`` is dropped."""
    from fairseq import options

    line = [w for w in args if w != "..."]
    line = [str(PLUGIN) if w.endswith("posenc/fairseq_plugin") else
            str(REPO / w) if i and line[i - 1] == "--user-dir" and not Path(w).is_absolute() else w
            for i, w in enumerate(line)]
    # A user dir that registers a position kind (docs/plugin.md's tests/toy_kind) must not leave it
    # registered in this test process: the registry and the imported user dir are put back.
    from posenc import kinds

    saved, user_dirs = dict(kinds._REGISTRY), {Path(line[i + 1]).name for i, w in enumerate(line[:-1])
                                                if w == "--user-dir"}
    try:
        parser = {"train": options.get_training_parser, "generate": options.get_generation_parser,
                  "validate": options.get_validation_parser}[tool]()
        accepted, why = run_quietly(options.parse_args_and_arch, parser, line)
    finally:
        kinds._REGISTRY.clear()
        kinds._REGISTRY.update(saved)
        for name in user_dirs - {"fairseq_plugin"}:
            sys.modules.pop(name, None)
    return None if accepted else f"fairseq-{tool}: {why}"


def check_wandb(args: list[str]) -> str | None:
    """The subcommand exists and every flag given is one of its options (click's own lists)."""
    import click
    from wandb.cli.cli import cli

    if not args:
        return None
    command = cli.get_command(click.Context(cli), args[0])
    if command is None:
        return f"wandb has no command {args[0]}"
    flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    unknown = [w for w in args[1:] if w.startswith("-") and w.split("=", 1)[0] not in flags]
    return f"wandb {args[0]} has no option {unknown[0]}" if unknown else None


def check_sacrebleu(args: list[str]) -> str | None:
    import sacrebleu.sacrebleu as cli

    with mock.patch.object(sys, "argv", ["sacrebleu", *args]):
        accepted, why = run_quietly(cli.parse_args)
    return None if accepted else f"sacrebleu: {why}"
