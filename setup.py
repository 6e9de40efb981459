"""Packaging beyond what pyproject.toml can say: the Hydra configs (``conf/``) and the papers'
reference numbers (``results/reference/*.csv``) stay where they are in the repository and travel in
the wheel as package data, ``posenc/conf`` and ``posenc/reference``, so a non-editable install
(``pip install <path or git URL>``, a wheel from ``python -m build``) composes cells from any
directory. There is no second copy in git: ``posenc/confdir.py`` reads the clone's own ``conf/``
where there is one (an editable install) and the packaged copy otherwise.

Everything else about the package is in pyproject.toml; the package list lives here because
setuptools lets pyproject.toml's ``[tool.setuptools]`` overwrite the same keys given here."""

from setuptools import find_namespace_packages, setup

# hydra_plugins is a namespace package (Hydra finds the sweepers and the launcher in it).
PACKAGES = find_namespace_packages(include=["posenc*", "hydra_plugins*"], exclude=["*.__pycache__"])
# Data packages: a directory of the repository installed as a package of posenc.
DATA = {"posenc.conf": ("conf", ["*.yaml", "**/*.yaml"]),
        "posenc.reference": ("results/reference", ["*.csv"])}

setup(packages=PACKAGES + list(DATA),
      package_dir={name: where for name, (where, _) in DATA.items()},
      package_data={name: globs for name, (_, globs) in DATA.items()},
      include_package_data=False)
