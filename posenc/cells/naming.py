"""Where a sweep goes and what its cells' directories are called, from the overrides that define them.

A sweep typed without ``hydra.sweep.dir`` goes to its base (the preset's directory, or
``results/sweeps/<experiment_name>``) followed by ``+`` and its overrides (``results/table4+data=
wmt14_en_de,model=fconv_table4``): the same command lands in the same directory, so a rerun resumes,
and another data set or model never shares a preset's directory. A slash in a value (a path) becomes
``_`` in both names, so a path never nests directories. This module is a leaf: the keys that never
name anything come from its callers (``posenc.cells.keys``, which registers the resolvers).
"""

import hashlib

SWEEP_JOIN = "+"     # base+overrides: a sibling of the preset's directory, never inside it (its cells are there)
MAX_NAME = 120       # longer override lists are cut, with a hash of the whole so two never share a name


def one_folder(name: str) -> str:
    """``name`` as a single directory name: every ``/`` (a path-valued override) becomes ``_``."""
    return name.replace("/", "_")


def sweep_name(task_overrides, unnamed) -> str:
    """The overrides that define a sweep, as one folder name: each ``key=value`` as typed (``+`` and
    ``++`` dropped, so ``+x=1`` and ``x=1`` are the same sweep), sorted; keys in ``unnamed`` left out,
    and so are swept keys (``seed=1,2,3``): their values name the cells, so a seed or a placement
    added when the sweep is typed again lands beside the cells it already has."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # late: only where a sweep is named

    items = []
    for override in OverridesParser.create().parse_overrides([str(line) for line in task_overrides]):
        if override.key_or_group in unnamed or override.is_sweep_override():
            continue
        line = override.input_line.lstrip("+")
        items.append(line)
    name = one_folder(",".join(sorted(items)))
    if len(name) > MAX_NAME:
        name = f"{name[:MAX_NAME - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return name


def sweep_dir(base: str, task_overrides, unnamed) -> str:
    """``base``, or ``base+<overrides>`` where the command line sets anything that names a sweep."""
    name = sweep_name(task_overrides, unnamed)
    return f"{base}{SWEEP_JOIN}{name}" if name else str(base)
