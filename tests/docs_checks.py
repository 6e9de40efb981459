"""What a documented command must be to hold, program by program, without running it: each check
answers ``None`` or one line saying what is wrong. The project's own tools are parsed in-process
(``docs_check_cli``, ``docs_check_hydra``); ``make`` gets a dry run; scripts must exist and know
the subcommands and flags the page gives them; programs of other projects are named, not checked."""

import functools
import os
import re
import subprocess
from importlib.util import find_spec
from pathlib import Path

from docs_check_cli import check_fairseq, check_posenc_pe, check_posenc_table, check_sacrebleu, check_wandb, last_line
from docs_check_hydra import check_posenc_run

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Where a path stops being one to check: placeholders (<sweep>, $POSENC_CACHE, *, ...).
PLACEHOLDER_CHARS = re.compile(r"[<>*${}]|\.\.\.")
# A script's dispatch on its first argument: `case "${1:-}" in ... esac`, and the words of its arms.
DISPATCH = re.compile(r'^case "?\$\{?1[^\n]*\bin\n(.*?)^esac', re.MULTILINE | re.DOTALL)
CASE_ARM = re.compile(r"^\s*([\w|-]+)\)", re.MULTILINE)

# Programs of other projects that the pages mention or show; what they accept is theirs to document.
EXTERNAL = {"apt", "apt-get", "cd", "export", "git", "kill", "ls", "nvidia-smi", "pip", "pip3", "pytest", "rm",
            "ruff", "sacct", "salloc", "sbatch", "scancel", "scontrol", "slurmd", "source", "squeue", "srun",
            "ssh", "time", "torchrun"}


def split_program(argv: list[str]):
    """``(program, args)`` with leading ``VAR=value`` set aside and ``.venv/bin/`` dropped."""
    rest = list(argv)
    while rest and ASSIGNMENT.match(rest[0]):
        rest.pop(0)
    if not rest:
        return None, []
    program = rest[0].removeprefix(".venv/bin/")
    return program, rest[1:]


def is_command(argv: list[str]) -> bool:
    """A code span that is a command line: a known program with something after it (a bare
    ``posenc-table`` in a sentence names the tool, it is no command)."""
    program, args = split_program(argv)
    return bool(program and args) and (program in CHECKS or program in EXTERNAL or program.startswith("scripts/"))


def check_command(argv: list[str], fenced: bool) -> str | None:
    program, args = split_program(argv)
    if program is None:
        return None
    if program.startswith(("scripts/", "./scripts/", ".ci/")):
        return check_script(program, args)
    if program in EXTERNAL:
        return None
    check = CHECKS.get(program)
    if check is None:
        # In a shell block every line is a command: one the checks do not know must be added here.
        return f"no check for `{program}` (tests/docs_checks.py: add one, or list it in EXTERNAL)" if fenced else None
    if program in PARTIAL_IN_PROSE:
        return check(args, whole=fenced)
    return check(args)


def check_make(args: list[str]) -> str | None:
    """``make -n`` of the targets and variables the page gives: the target exists and its recipe
    expands; a variable the Makefile never reads (a misspelt override) is refused too."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for name in (a.split("=", 1)[0] for a in args if ASSIGNMENT.match(a)):
        if not re.search(rf"\b{re.escape(name)}\b", makefile):
            return f"the Makefile reads no variable {name}"
    # Under `make test` the parent's flags and command-line variables would reach this make too.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    proc = subprocess.run(["make", "-n", "-C", str(REPO), *args], capture_output=True, text=True, timeout=60, env=env)
    if proc.returncode != 0:
        return last_line(proc.stderr) or f"make -n exited {proc.returncode}"
    return None


def check_python(args: list[str]) -> str | None:
    """``python -m MODULE``: ours must import; ``python SCRIPT``: as a script of the repository."""
    if args[:1] == ["-m"] and len(args) > 1:
        module = args[1]  # -m venv, -m pytest: other projects'
        if not module.startswith("posenc"):
            return None
        return None if find_spec(module) else f"no module {module}"
    if args and not args[0].startswith("-"):
        return check_script(args[0], args[1:])
    return None


def check_shell(args: list[str]) -> str | None:
    return check_script(args[0], args[1:], executable=False) if args else None


def check_script(script: str, args: list[str], executable: bool = True) -> str | None:
    """The script exists (executable when run by path); a first word that is not a flag is one of
    its ``case`` arms; every flag given occurs in its source (argparse's ``"--rounds"``, bash's
    ``--no-accounting``)."""
    path = REPO / script.removeprefix("./")
    if not path.is_file():
        return f"no such script {script}"
    if executable and not path.stat().st_mode & 0o111:
        return f"{script} is not executable"
    source = path.read_text(encoding="utf-8")
    dispatch = DISPATCH.search(source)
    if args and not args[0].startswith("-") and dispatch:
        arms = {word for arm in CASE_ARM.findall(dispatch.group(1)) for word in arm.split("|")}
        if args[0] not in arms:
            return f"{script} has no subcommand {args[0]} (it has: {', '.join(sorted(arms - {'*'}))})"
    for flag in (a.split("=", 1)[0] for a in args if a.startswith("--")):
        if flag not in source:
            return f"{script} knows no flag {flag}"
    return None


def check_xargs(args: list[str]) -> str | None:
    """The command xargs runs, past its own options (``-P 8 -n 1``)."""
    rest = list(args)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-P", "-n", "-I", "-L", "-d") else rest[1:]
    return check_command(rest, fenced=True) if rest else None


# Tools a sentence may quote in part (`posenc-pe bases`, `posenc-table --format csv`): outside a
# shell block their lines need not carry the required arguments, but what they carry must hold.
PARTIAL_IN_PROSE = {"posenc-table", "posenc-pe"}
CHECKS = {
    "posenc-run": check_posenc_run,
    "posenc-prepare": check_posenc_run,  # the same overrides, -m and --config-dir
    "posenc-table": check_posenc_table,
    "posenc-pe": check_posenc_pe,
    "fairseq-train": functools.partial(check_fairseq, "train"),
    "fairseq-generate": functools.partial(check_fairseq, "generate"),
    "fairseq-validate": functools.partial(check_fairseq, "validate"),
    "make": check_make,
    "wandb": check_wandb,
    "sacrebleu": check_sacrebleu,
    "python": check_python,
    "python3": check_python,
    "bash": check_shell,
    "sh": check_shell,
    "xargs": check_xargs,
}


# -- paths ------------------------------------------------------------------------------------------


@functools.cache
def tracked_files() -> frozenset[str]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True).stdout
    return frozenset(out.splitlines())


@functools.cache
def top_level() -> frozenset[str]:
    return frozenset(path.split("/", 1)[0] for path in tracked_files() if "/" in path)


def path_candidates(argv: list[str]) -> list[str]:
    """Words that name a file or folder of the repository: ``dir/...`` under one of its tracked
    top-level folders (also as ``key=dir/...`` or ``--flag=dir/...``), or a bare ``name.py``."""
    found = []
    for word in argv:
        key, eq, rest = word.partition("=")
        value = rest if eq and "/" not in key else word  # key=dir/..., but results/table4/placement=both,.../
        value = value.rstrip(",.:;")
        if not value or PLACEHOLDER_CHARS.search(value):
            continue
        first = value.removeprefix("./").split("/", 1)[0]
        if ("/" in value and first in top_level()) or re.fullmatch(r"[\w-]+\.py", value):
            found.append(value)
    return found


def names_repo_path(argv: list[str]) -> bool:
    return bool(path_candidates(argv))


def check_paths(argv: list[str]) -> str | None:
    """Every repository path named exists, or is where the tools write (ignored by git: a sweep
    under ``results/table4/``); a bare ``name.py`` is a tracked file somewhere in the repository."""
    for value in path_candidates(argv):
        if "/" not in value:
            if not any(path.rsplit("/", 1)[-1] == value for path in tracked_files()):
                return f"no file {value} in the repository"
        elif not (REPO / value).exists() and not ignored(value):
            return f"no such path {value}"
    return None


def ignored(path: str) -> bool:
    """Ignored by git as a file or as a folder (``results/table4/`` matches only folders, and a
    sweep's folder is named before it exists)."""
    paths = [path] if path.endswith("/") else [path, path + "/"]
    proc = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", *paths], capture_output=True)
    return proc.returncode == 0

