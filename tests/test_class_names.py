"""One home per name: no two modules of ``posenc/`` define a top-level class of the same name (issue
61: ``Job`` was both a running cell's Hydra side, ``posenc.harness.app``, and a planner's launch
request, now ``posenc.harness.sweep.planner.Launch``), so a name read in one module means one thing."""
import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "posenc"


def classes_defined_twice(root: Path) -> dict:
    homes = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                homes[node.name].append(str(path.relative_to(root.parent)))
    return {name: where for name, where in homes.items() if len(where) > 1}


def test_every_class_name_has_one_home():
    assert classes_defined_twice(PACKAGE) == {}


def test_the_check_sees_a_name_defined_twice(tmp_path):
    package = tmp_path / "posenc"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("class Job:\n    pass\n")
    (package / "sub" / "b.py").write_text("class Job:\n    pass\n\n\nclass Other:\n    pass\n")
    assert classes_defined_twice(package) == {"Job": ["posenc/a.py", "posenc/sub/b.py"]}
