"""No module is imported by a string naming another room: an import the graph cannot see.

A string that names a module of ``posenc`` (``"posenc.x.y"`` or ``"posenc.x.y:function"``, the form
a registration resolves later) may only name one in the room of the file that holds it. Rooms: the
position kinds (``kinds/`` and ``encodings/``: the registry names its built-in
builders by string, so that its readers never import torch), each floor of the harness, each room
of the analysis, and every other package or top-level module on its own."""

import ast
import re
from pathlib import Path

POSENC = Path(__file__).resolve().parents[1] / "posenc"
MODULE = re.compile(r"^posenc(\.\w+)+(:\w+)?$")
KINDS = {"kinds", "encodings"}
SPLIT = {"harness", "analysis"}   # packages whose subpackages are rooms of their own


def room(parts: list) -> str:
    """The room of a module given by its parts under ``posenc`` (``["analysis", "read", "x"]``)."""
    if parts[0] in KINDS:
        return "kinds"
    if parts[0] in SPLIT and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def named_modules(path: Path) -> list:
    """The posenc modules a file names in string constants."""
    return [node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE.match(node.value)]


# Named for a child process, never imported here: the program fairseq's training runs as (``python
# -m``), the plugin's directory it gets as ``--user-dir``, the warm trainer that forks it, and the
# memory estimate a sweep's start asks of a child (the harness never imports torch).
CHILDREN = {("harness/config/commands.py", "posenc.trainer.train"),
            ("harness/run/warm.py", "posenc.trainer.warm"),
            ("harness/config/commands.py", "posenc.fairseq_plugin"),
            ("harness/launch/sharing.py", "posenc.trainer.memory")}


def crossings(files, root: Path = POSENC) -> list:
    out = []
    for path in files:
        where = path.relative_to(root)
        here = room(list(where.with_suffix("").parts))
        for name in named_modules(path):
            there = room(name.split(":")[0].split(".")[1:])
            if there != here and (str(where), name) not in CHILDREN:
                out.append(f"{where} ({here}) names {name} ({there})")
    return out


def test_no_string_names_a_module_of_another_room():
    assert crossings(sorted(POSENC.rglob("*.py"))) == []


def test_the_check_finds_the_registry_naming_the_analysis_by_string(tmp_path):
    """As ``kinds.py`` once named the analysis's rebuilds: found; its builders in ``encodings/``
    (the same room) are not."""
    (tmp_path / "kinds.py").write_text('REBUILD = "posenc.analysis.read.relative_bias:rebuild_alibi"\n'
                                       'BUILD = "posenc.encodings.learned:build_side"\n')
    assert crossings([tmp_path / "kinds.py"], tmp_path) == \
        ["kinds.py (kinds) names posenc.analysis.read.relative_bias:rebuild_alibi (analysis/read)"]


def test_the_analysis_registers_a_rebuild_for_every_built_in_kind_it_rebuilds():
    """Entered by any of its modules (here the checkpoint reader alone, in a fresh interpreter), the
    analysis has a rebuild for each built-in kind that reads a bias or relative vectors."""
    import subprocess
    import sys

    code = ("import posenc.analysis.read.fairseq_checkpoint\n"
            "from posenc.analysis.read.rebuilds import rebuilder\n"
            "from posenc.kinds import BUILTIN_KINDS, REBUILT, find_kind\n"
            "kinds = [find_kind(k) for k in BUILTIN_KINDS if find_kind(k).checkpoint.reads in REBUILT]\n"
            "print(sorted(f'{k.name}={rebuilder(k).__module__}.{rebuilder(k).__name__}' for k in kinds))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=POSENC.parent).stdout
    assert out.strip() == str(["alibi=posenc.analysis.read.relative_bias.rebuild_alibi",
                               "shaw=posenc.analysis.read.relative_vectors.rebuild_shaw",
                               "t5=posenc.analysis.read.relative_bias.rebuild_t5"])


# The calls that import a module named at run time, each with why (from the issue-41d branch's check).
DYNAMIC_IMPORTS = {
    "kinds/__init__.py": "resolve_callable: a registration's builder (or a user's rebuild) given as 'module:function'",
    "encodings/__init__.py": "PEP 562: its own submodules, f'{__name__}.{home}'",
}


def test_every_dynamic_import_is_listed_with_why():
    """``importlib.import_module`` and ``__import__`` import what no import statement shows."""
    found = set()
    for path in POSENC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            f = getattr(node, "func", None)
            if isinstance(node, ast.Call) and (getattr(f, "attr", None) or getattr(f, "id", None)) in \
                    ("import_module", "__import__"):
                found.add(str(path.relative_to(POSENC)))
    assert found == set(DYNAMIC_IMPORTS), sorted(found)
