"""The root config's and the data presets' defaults have one home each: the structured configs in
Hydra's ConfigStore (``posenc_schema``: ``posenc.harness.config.schema.RootSchema``;
``posenc_data_schema``: ``posenc.corpora.config.DataSchema``). The YAML says no default again,
the code's fallbacks read the dataclasses, and a data preset of the user's own that does not list
the schema still composes and parses."""

import ast
import re
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf, open_dict

from posenc.corpora.config import DataSchema, data_defaults, parse
from posenc.harness.config.resolve import resolve_cell
from posenc.harness.config.schema import RootSchema, root_defaults
from project import CONF, REPO, cell_of, compose_cfg, posenc_run

pytestmark = pytest.mark.usefixtures("without_fairseq_config_store")  # the config is composed here

DATA_PRESETS = sorted(p.stem for p in (CONF / "data").glob("*.yaml"))
CUSTOM_FILES = ("data.train=/a", "data.valid=/b", "data.test=/c", "data.src=de", "data.tgt=en")


def test_the_schemas_are_in_hydras_config_store():
    """Stored when Hydra scans its plugins (hydra_plugins/posenc_config), before it composes."""
    compose_cfg(hydra=False)
    repo = ConfigStore.instance().repo
    assert repo["posenc_schema.yaml"].provider == "posenc"
    assert repo["posenc_data_schema.yaml"].provider == "posenc"
    assert OmegaConf.to_container(repo["posenc_schema.yaml"].node) == root_defaults()
    stored = OmegaConf.to_container(repo["posenc_data_schema.yaml"].node)
    assert {k: v for k, v in stored.items() if v != "???"} == data_defaults()


def test_the_root_config_leaves_every_default_to_the_schema():
    """conf/config.yaml sets none of the schema's settings, and the config composed with no
    override holds exactly the schema's defaults."""
    raw = OmegaConf.load(CONF / "config.yaml")
    assert "posenc_schema" in raw.defaults
    assert set(raw) == {"defaults", "hydra"}
    cfg = compose_cfg(hydra=False)
    composed = OmegaConf.to_container(cfg, resolve=False)
    assert {key: composed[key] for key in root_defaults()} == root_defaults()
    # in the order the YAML showed them in, after the groups
    assert list(composed)[-len(root_defaults()):] == list(root_defaults())


@pytest.mark.parametrize("preset", DATA_PRESETS)
def test_a_data_preset_states_only_what_its_recipe_sets_otherwise(preset):
    """Each packaged data preset lists the schema; a shared key it leaves out composes to the
    schema's default, and a shared key it sets is one whose value differs from the default."""
    raw = OmegaConf.to_container(OmegaConf.load(CONF / "data" / f"{preset}.yaml"))
    assert raw.pop("defaults") == ["/posenc_data_schema", "_self_"]
    defaults = data_defaults()
    repeated = [key for key, value in raw.items() if key in defaults and (
        value == defaults[key] or (isinstance(value, dict) and any(v == defaults[key][k] for k, v in value.items())))]
    assert repeated == [], f"conf/data/{preset}.yaml repeats the schema's defaults of {repeated}"
    data = OmegaConf.to_container(compose_cfg(f"data={preset}", *(CUSTOM_FILES if preset == "custom" else ()),
                                              hydra=False).data)
    for key, value in defaults.items():
        if key == "filter":
            assert data[key] == {**value, **raw.get(key, {})}
        else:
            assert data[key] == raw.get(key, value), key


def literal_fallbacks(source: str, keys: set) -> list:
    """``line: call`` of each ``x.get("key", <literal>)`` or ``_int(raw, "key", <literal>)`` of a schema key."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        args = node.args if name == "get" else node.args[1:] if name == "_int" else None
        if args and len(args) >= 2 and isinstance(args[0], ast.Constant) and args[0].value in keys \
                and isinstance(args[1], ast.Constant | ast.Dict | ast.List):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


FALLBACK_READERS = {
    "posenc/harness/config/resolve.py": set(root_defaults()),
    "posenc/corpora/config.py": set(data_defaults()),
}


@pytest.mark.parametrize("path", sorted(FALLBACK_READERS))
def test_no_default_is_repeated_as_a_literal_fallback(path):
    source = (REPO / path).read_text(encoding="utf-8")
    assert literal_fallbacks(source, FALLBACK_READERS[path]) == []
    # The rule can fail: a fallback written out again is caught.
    again = source + '\nx = cfg.get("redo", False)\ny = raw.get("workers", 1)\nz = _int(raw, "subword_size", 10000)\n'
    assert len(literal_fallbacks(again, FALLBACK_READERS[path])) >= 1


def modules_of(path: Path) -> list:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names] + \
        [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


def test_the_schemas_have_no_hydra_and_every_field_is_any():
    """The dataclasses are plain Python (the corpora package never imports Hydra), and every value is
    checked by posenc itself, in one line naming it, never by OmegaConf's type errors."""
    from dataclasses import fields
    from typing import Any

    for schema in (RootSchema, DataSchema):
        assert all(f.type in (Any, "Any") for f in fields(schema)), schema
    for path in [REPO / "posenc/harness/config/schema.py", *(REPO / "posenc/corpora").rglob("*.py")]:
        assert not any(m == "hydra" or m.startswith("hydra.") for m in modules_of(path)), path
    assert not any(m.startswith(("hydra", "omegaconf")) for m in modules_of(REPO / "posenc/harness/config/schema.py"))


@pytest.mark.parametrize("override,named", [
    ("data.workers=two", "data.workers='two': must be a whole number"),
    ("precision=fp64", "precision='fp64' is not allowed; allowed: fp32, fp16, bf16"),
    ("placement=middle", "placement='middle' is not allowed; allowed:"),
])
def test_a_bad_value_is_refused_in_one_line_naming_it(override, named):
    resolved = resolve_cell(compose_cfg("paths.cache_dir=/no/cache", override, hydra=False))
    assert resolved.refused is not None and named in str(resolved.refused)
    assert "\n" not in str(resolved.refused)


def test_a_config_without_a_setting_takes_the_schemas_default():
    """A root config that leaves ``redo`` and ``trial`` out (one of the user's own, without the
    schema) resolves with the schema's defaults."""
    cfg = compose_cfg("paths.cache_dir=/no/cache", hydra=False)
    with open_dict(cfg):
        del cfg["redo"], cfg["trial"]
    cell = cell_of(resolve_cell(cfg))
    assert (cell.redo, cell.trial) == (RootSchema.redo, RootSchema.trial)


def users_preset(tmp_path: Path, text: str) -> Path:
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "mine.yaml").write_text(text, encoding="utf-8")
    return tmp_path


WITHOUT_SCHEMA = "name: mine\nrecipe: synthetic\nsrc: en\ntgt: vf\ngenerator: {train: 300, valid: 30, test: 30}\n"


@pytest.mark.parametrize("text", [
    WITHOUT_SCHEMA,                                                  # written from scratch, no defaults list
    "defaults:\n  - /posenc_data_schema\n  - _self_\n" + WITHOUT_SCHEMA,   # listing the schema
    "defaults:\n  - synthetic\n  - _self_\nname: mine\ngenerator: {train: 300, valid: 30, test: 30}\n",  # the docs'
], ids=["without_schema", "with_schema", "from_synthetic"])
def test_a_users_data_preset_composes_and_parses(tmp_path, text):
    """A data preset in the user's own directory (hydra.searchpath, as --config-dir adds it)
    composes whether it lists the schema or not; a shared key it leaves out is the schema's default,
    whether Hydra merged the schema (composed) or not (parsed)."""
    presets = users_preset(tmp_path, text)
    cfg = compose_cfg("paths.cache_dir=/no/cache", "data=mine", f"hydra.searchpath=[file://{presets}]", hydra=False)
    data = parse(cfg.data)
    assert (data.name, data.recipe, data.generator.train) == ("mine", "synthetic", 300)
    assert data.workers == DataSchema.workers
    assert (data.text.tokenizer, data.joined_dictionary, data.length_split) == \
        (DataSchema.tokenizer, DataSchema.joined_dictionary, None)
    assert data.filter.as_dict() == data_defaults()["filter"]
    if text == WITHOUT_SCHEMA:   # Hydra merged nothing into it: the config is the user's as written
        assert "workers" not in cfg.data
    cell_of(resolve_cell(cfg))


@pytest.mark.parametrize("flag", ["--help", "--hydra-help"])
def test_help_offers_no_schema_as_a_choice(tmp_path, flag):
    """The schemas are the presets' defaults, not presets: no group's list of choices in
    ``posenc-run --help`` (the app's groups) or ``--hydra-help`` (hydra/launcher, hydra/sweeper) names
    one, while the presets that list them are still offered."""
    proc = posenc_run(flag, cwd=tmp_path, cache=tmp_path / "cache", timeout=120)
    assert proc.returncode == 0, proc.stderr
    choices = {line.split(":", 1)[0]: line.split(":", 1)[1].replace(",", " ").split()
               for line in proc.stdout.splitlines() if re.match(r"^[\w/]+: \w", line)}
    offered = [f"{group}={name}" for group, names in choices.items() for name in names
               if "schema" in name or (name.startswith("posenc_") and name.endswith("_base"))]
    assert not offered, f"posenc-run {flag} offers schema nodes as choices: {offered}"
    expected = {"--help": ("data", "synthetic"), "--hydra-help": ("hydra/launcher", "slurm")}[flag]
    assert expected[1] in choices[expected[0]], proc.stdout
    if flag == "--hydra-help":
        assert {"posenc_seeds", "posenc_tune"} <= set(choices["hydra/sweeper"]), proc.stdout
