"""The analysis's rooms import one way: read <- measure <- write <- the command line.

``posenc/analysis/read/`` imports no other room, ``measure/`` only ``read/``, ``write/`` only
``measure/`` and ``read/``; nothing in a room imports the command line (``cli.py``) or the package's
top-level modules. Imports are read with ``ast``, so the lazy ones inside functions count too."""

import ast
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parents[1] / "posenc" / "analysis"
PACKAGE = "posenc.analysis"
ROOMS = ("read", "measure", "write")  # lowest first: a room may import the rooms before it
ALLOWED = {room: set(ROOMS[: i + 1]) for i, room in enumerate(ROOMS)}


def analysis_imports(path: Path) -> set:
    """The modules of ``posenc.analysis`` a file imports, anywhere in it, as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # "from posenc.analysis.measure import probes" imports the module measure.probes
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: relative import; the rooms are checked on absolute imports")
        else:
            continue
        found.update(n for n in names if n == PACKAGE or n.startswith(PACKAGE + "."))
    return found


def room_of(module: str):
    """The room a dotted module name lies in, or None (the package itself, ``cli``, or a top-level module)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in ROOMS else None


def room_files():
    return sorted((room, path) for room in ROOMS for path in (ANALYSIS / room).rglob("*.py"))


def test_every_analysis_module_is_in_a_room_or_named_here():
    """A new module goes into a room; only the command line stays on top."""
    top = sorted(p.name for p in ANALYSIS.glob("*.py"))
    assert top == ["__init__.py", "cli.py"], top
    assert all((ANALYSIS / room / "__init__.py").is_file() for room in ROOMS)


@pytest.mark.parametrize("room,path", room_files(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_a_room_imports_only_the_rooms_below_it(room, path):
    wrong = []
    for module in sorted(analysis_imports(path)):
        target = room_of(module)
        if module == PACKAGE:
            continue  # importing the package (its __init__ runs anyway) names no room
        if target is None or target not in ALLOWED[room]:
            wrong.append(module)
    assert not wrong, f"{path.relative_to(ANALYSIS)} ({room}/) imports {wrong}: allowed are {sorted(ALLOWED[room])}"


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check itself: a reading module that imports the measuring room is caught, lazy or not."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from posenc.analysis.measure.table import analyze_table\n")
    assert {room_of(m) for m in analysis_imports(bad)} == {"measure"}
    assert "measure" not in ALLOWED["read"] and "write" not in ALLOWED["measure"]
