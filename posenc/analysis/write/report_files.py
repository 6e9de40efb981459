"""``report.json`` and ``report.md`` in the output directory: every command's one JSON writer and
the sinusoid's and checkpoint's Markdown writer."""

import math
import os

from posenc.atomic import write_json_atomic


def json_ready(obj):
    """JSON-ready: NaN and infinities become null; tensors and numpy scalars become numbers."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return json_ready(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj


def write_json(report: dict, out_dir: str) -> str:
    """``report.json`` in ``out_dir``, written atomically: every posenc-pe command's one writer."""
    path = os.path.join(out_dir, "report.json")
    write_json_atomic(path, json_ready(report))
    return path


def write_markdown(text: str, out_dir: str) -> str:
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as fh:
        fh.write(text)
    return path


__all__ = ["json_ready", "write_json", "write_markdown"]
