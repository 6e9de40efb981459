"""No function in ``posenc/`` is longer than 60 lines of code (its docstring not counted) unless its
docstring says why ("Long because ..."): a reader should see a function whole."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "posenc"
LIMIT = 60


def code_lines(node) -> int:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:] or body
    return node.end_lineno - body[0].lineno + 1


def long_functions(root: Path) -> list:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and code_lines(node) > LIMIT \
                    and "Long because" not in (ast.get_docstring(node) or ""):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({code_lines(node)} lines)")
    return found


def test_no_long_function_without_a_reason():
    assert long_functions(PACKAGE) == []


def test_the_check_sees_a_long_function(tmp_path):
    package = tmp_path / "posenc"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    source = f'def f():\n    """Doc."""\n{body}\n\n\ndef g():\n    """Long because: a test."""\n{body}\n'
    (package / "long.py").write_text(source)
    assert long_functions(package) == [f"posenc/long.py:1 f ({LIMIT + 1} lines)"]
