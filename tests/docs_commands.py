"""Every command a page shows, found with Sybil and checked without running it.

Sybil lexes the page: each fenced shell block (```bash, ```sh or a bare ```) is an example whose
lines are all commands, and each code span in the prose that starts with a program the checks
know (``posenc-run ...``, ``make test``) or names a repository path is one too. The evaluator
cuts a block into commands (continuation lines joined, comments dropped, pipes and ``&&`` split,
leading ``VAR=value`` assignments set aside) and hands each to ``docs_checks``; it answers one
line per command that does not hold, so a page's failures are all listed at once."""

import shlex
from pathlib import Path

from sybil import Region, Sybil
from sybil.example import SybilFailure

from docs_checks import check_command, check_paths, is_command, names_repo_path
from docs_markdown import SHELL, blocks, code_spans, fenced_blocks

SEPARATORS = {"|", "||", "&&", ";", "&"}
ALTERNATIVE = "\x00"  # stands for a synopsis's "|" while shlex splits the line


def shell_commands(source: str):
    """``(line offset, argv)`` of each command in a shell block's source."""
    logical, first = "", None
    for number, line in enumerate(source.splitlines()):
        if first is None:
            first = number
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        yield from ((first, argv) for argv in split_line(logical))
        logical, first = "", None
    if logical.strip():
        yield from ((first, argv) for argv in split_line(logical))


def split_line(line: str):
    """The commands of one logical shell line: comments dropped, split at pipes and lists. A ``|``
    inside a synopsis's brackets (``[--variant paper|fairseq]``) is an alternative, not a pipe."""
    lexer = shlex.shlex(protect_alternatives(line), posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    argv: list[str] = []
    for token in lexer:
        if token in SEPARATORS:
            if argv:
                yield argv
            argv = []
        else:
            argv.append(token.replace(ALTERNATIVE, "|"))
    if argv:
        yield argv


def protect_alternatives(line: str) -> str:
    out, depth = [], 0
    for char in line:
        depth += (char == "[") - (char == "]")
        out.append(ALTERNATIVE if char == "|" and depth > 0 else char)
    return "".join(out)


def evaluate_block(example) -> str | None:
    """Every command of a fenced block must hold; one line per command that does not."""
    failures = []
    first_line = example.line + 1  # the fence line itself comes first
    for offset, argv in shell_commands(example.parsed):
        why = check_command(argv, fenced=True) or check_paths(argv)
        if why:
            failures.append(f"{where(example, first_line + offset)}: `{shlex.join(argv)}`: {why}")
    return "\n".join(failures) or None


def evaluate_span(example) -> str | None:
    text = example.parsed
    try:
        argv = shlex.split(text)
    except ValueError as err:
        return f"{where(example, example.line)}: `{text}`: not a shell command line ({err})"
    why = (check_command(argv, fenced=False) if is_command(argv) else None) or check_paths(argv)
    return f"{where(example, example.line)}: `{text}`: {why}" if why else None


def where(example, line: int) -> str:
    """``page:line``, the page relative to the root the caller gave (``page_failures``)."""
    return f"{Path(example.path).relative_to(example.namespace['root'])}:{line}"


def parse_shell_blocks(document):
    for region in fenced_blocks(document):
        if region.lexemes["language"] in SHELL:
            yield Region(region.start, region.end, str(region.lexemes["source"]), evaluate_block)


def parse_code_spans(document):
    """A region per code span of the prose that is a command or names a path of the repository."""
    for block in blocks(document):
        if block.kind == "code":
            continue
        for start, end, content in code_spans(block):
            try:
                argv = shlex.split(content)
            except ValueError:
                argv = []
            if argv and (is_command(argv) or names_repo_path(argv)):
                yield Region(block.start + start, block.start + end, content, evaluate_span)


SYBIL = Sybil(parsers=[parse_shell_blocks, parse_code_spans], patterns=["*.md"])


def page_failures(page: Path, root: Path) -> list[str]:
    """One line per command or path of the page that does not hold."""
    document = SYBIL.parse(page)
    document.namespace["root"] = root
    failures = []
    for example in document:
        try:
            example.evaluate()
        except SybilFailure as failure:  # the evaluator's answer: one line per bad command
            failures.extend(failure.result.splitlines())
    return failures
