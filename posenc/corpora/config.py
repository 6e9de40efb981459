"""The `data` config node, parsed and checked into one typed object, and the defaults of the keys
every recipe shares (``DataSchema``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .databin import DataBin, read_databin
from .errors import CorpusError
from .filtering import FilterSettings
from .length_split import LengthSplit, parse_length_split
from .moses import TextSettings
from .subwords import SubwordSettings
from .synthetic import GeneratorConfig
from .textio import read_lines
from .validate import check_languages

RECIPE_NAMES = ("synthetic", "custom", "multi30k", "iwslt14", "wmt14_en_de", "wmt16_en_ro", "binarized")
REFERENCE_SPLITS = ("test", "test_long")


@dataclass
class DataSchema:
    """The keys every recipe's ``data`` node has, and the one home of their defaults: Hydra's
    ConfigStore holds them as ``posenc_data_schema`` (hydra_plugins/posenc_config), which each
    packaged data preset lists first in its defaults, stating only what its recipe sets otherwise;
    ``parse`` takes them for a key a node leaves out (a preset of yours that does not list the
    schema). The text, subword and filter settings' defaults are their classes' (TextSettings,
    SubwordSettings, FilterSettings), which the pipeline builds. Every field is typed ``Any``:
    ``parse`` refuses a bad value itself, in one line naming it. A recipe's own keys (``generator``,
    ``mirror``, ``train``...) and its own defaults are in its preset (conf/data/)."""
    name: Any = MISSING            # the preset's name (without it: the recipe's)
    recipe: Any = MISSING          # RECIPE_NAMES
    src: Any = MISSING             # language codes
    tgt: Any = MISSING
    tokenizer: Any = TextSettings.tokenizer
    normalize_punct: Any = TextSettings.normalize_punct
    lowercase: Any = TextSettings.lowercase
    aggressive_dash_splits: Any = TextSettings.aggressive_dash_splits
    subword: Any = SubwordSettings.kind
    subword_size: Any = SubwordSettings.size
    joint_subwords: Any = SubwordSettings.joint
    joined_dictionary: Any = False
    filter: Any = field(default_factory=lambda: asdict(FilterSettings()))
    workers: Any = 2
    length_split: Any = None       # the length split (docs/corpora.md#a-length-split): null is none
    test_long_size: Any = None
    length_split_by: Any = None    # null: source


def data_defaults() -> dict:
    """``DataSchema``'s defaults as plain data, without the keys that have none (name, recipe, src, tgt)."""
    return {f.name: (f.default if f.default is not MISSING else f.default_factory())
            for f in fields(DataSchema) if f.default is not MISSING or f.default_factory is not MISSING}


_COMMON_KEYS = {f.name for f in fields(DataSchema)}
_RECIPE_KEYS = {
    "synthetic": {"generator"},
    "custom": {"train", "valid", "test"},
    "multi30k": {"mirror"},
    "iwslt14": {"mirror"},
    "wmt14_en_de": {"mirror"},
    "wmt16_en_ro": {"mirror"},
    "binarized": {"dir", "test_long", "references"},
}


@dataclass(frozen=True)
class CorpusConfig:
    name: str
    recipe: str
    src: str
    tgt: str
    text: TextSettings
    subwords: SubwordSettings
    joined_dictionary: bool
    filter: FilterSettings
    workers: int            # fairseq-preprocess --workers (DataSchema.workers unless the node sets it)
    generator: GeneratorConfig | None = None
    prefixes: dict[str, str] = field(default_factory=dict)  # custom: split -> file prefix
    mirror: str | None = None
    length_split: LengthSplit | None = None  # data.length_split: train/valid up to L tokens, test_long beyond
    databin: DataBin | None = None  # binarized: the user's data-bin, read from data.dir
    references: dict[str, str] = field(default_factory=dict)  # binarized: split -> raw reference file

    def preprocessing(self) -> dict:
        """Everything that changes the binarized data (part of the cache key)."""
        return {
            "src": self.src,
            "tgt": self.tgt,
            "text": self.text.as_dict(),
            "subwords": self.subwords.as_dict(),
            "joined_dictionary": self.joined_dictionary,
            "filter": self.filter.as_dict(),
            # only when set, so every corpus cached before the option keeps its key
            **({"length_split": self.length_split.as_dict()} if self.length_split else {}),
            **({"databin": {"subsets": self.databin.subsets, "references": sorted(self.references)}}
               if self.databin else {}),
        }


def to_plain_dict(data_cfg: Any) -> dict:
    """Accept a dict or an OmegaConf node; unset mandatory values (???) fail with their key."""
    if isinstance(data_cfg, Mapping) and not hasattr(data_cfg, "_get_node"):
        return dict(data_cfg)
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        return OmegaConf.to_container(data_cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as err:
        key = getattr(err, "full_key", "") or "a data key"
        raise CorpusError(
            f"data.{key.removeprefix('data.')} is not set: give it on the command line, e.g. "
            f"data.{key.removeprefix('data.')}=..."
        ) from None


def _recipe(raw: dict) -> str:
    """The recipe the data config names, once its keys are all the recipe's."""
    recipe = raw.get("recipe", raw.get("name"))
    if recipe not in RECIPE_NAMES:
        raise CorpusError(
            f"data.recipe={recipe!r}: allowed recipes are {', '.join(RECIPE_NAMES)}"
        )
    allowed = _COMMON_KEYS | _RECIPE_KEYS[recipe]
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise CorpusError(
            f"unknown key data.{unknown[0]} for recipe {recipe}; allowed keys: "
            f"{', '.join(sorted(allowed))}"
        )
    return recipe


def _custom_prefixes(raw: dict, src: str, tgt: str) -> dict:
    """The custom recipe's file prefix of each split."""
    prefixes = {}
    for split in ("train", "valid", "test"):
        value = raw.get(split)
        if value in (None, "", "???"):
            raise CorpusError(
                f"data.{split} is not set: give the file prefix, e.g. data.{split}=/path/"
                f"{split} for {split}.{src} and {split}.{tgt}"
            )
        prefixes[split] = str(value)
    return prefixes


def parse(data_cfg: Any) -> CorpusConfig:
    """The ``data`` node (a dict or an OmegaConf node) parsed and checked; a CorpusConfig as it is.
    CorpusError (one line naming the key) for any bad value."""
    if isinstance(data_cfg, CorpusConfig):
        return data_cfg
    raw = to_plain_dict(data_cfg)
    recipe = _recipe(raw)
    raw = {**data_defaults(), **raw}
    databin, references = _binarized(raw) if recipe == "binarized" else (None, {})
    src, tgt = _languages(raw, databin)

    text = TextSettings(
        tokenizer=str(raw["tokenizer"]),
        normalize_punct=bool(raw["normalize_punct"]),
        lowercase=bool(raw["lowercase"]),
        aggressive_dash_splits=bool(raw["aggressive_dash_splits"]),
    )
    subwords = SubwordSettings(
        kind=str(raw["subword"]),
        size=_int(raw, "subword_size"),
        joint=bool(raw["joint_subwords"]),
    )
    filter_settings = _build(FilterSettings, raw["filter"] or {}, "data.filter")
    for part in (text, subwords, filter_settings):
        part.check()

    generator = None
    prefixes: dict[str, str] = {}
    if recipe == "synthetic":
        generator = _build(GeneratorConfig, raw.get("generator") or {}, "data.generator")
        generator.check()
    elif recipe == "custom":
        prefixes = _custom_prefixes(raw, src, tgt)
    length_split = parse_length_split(raw["length_split"], raw["test_long_size"], raw["length_split_by"])
    if length_split and generator and generator.test_long:
        raise CorpusError(f"data.length_split={length_split.max_tokens}: the synthetic corpus already has a "
                          f"test_long split (data.generator.test_long={generator.test_long}); set "
                          "data.generator.test_long=0 to make it by length instead")
    workers = _int(raw, "workers")
    if workers < 1:
        raise CorpusError(f"data.workers={workers}: must be >= 1")
    return CorpusConfig(
        name=str(raw.get("name", recipe)),
        recipe=recipe,
        src=src,
        tgt=tgt,
        text=text,
        subwords=subwords,
        joined_dictionary=databin.joined_dictionary if databin else bool(raw["joined_dictionary"]),
        filter=filter_settings,
        workers=workers,
        generator=generator,
        prefixes=prefixes,
        mirror=raw.get("mirror") or None,
        length_split=length_split,
        databin=databin,
        references=references,
    )


def _languages(raw: dict, databin: DataBin | None) -> tuple[str, str]:
    """``(data.src, data.tgt)``, checked; a data-bin's as it says, or as data.src/data.tgt chose."""
    for key in ("src", "tgt"):
        if databin:
            raw[key] = getattr(databin, key)
        if raw.get(key) in (None, "???"):
            raise CorpusError(f"data.{key} is not set: give the language code, e.g. data.{key}=de")
    src, tgt = str(raw["src"]), str(raw["tgt"])
    check_languages(src, tgt)
    return src, tgt


def _binarized(raw: dict):
    """``(DataBin, {split: reference file})`` of ``data=binarized``: the data-bin at ``data.dir`` with
    the pair and splits it needs, and the raw references of every scored split or of none."""
    if raw.get("dir") in (None, "", "???"):
        raise CorpusError("data.dir is not set: give the data-bin fairseq-preprocess wrote, "
                          "e.g. data.dir=data-bin/wmt14")
    if raw.get("length_split") is not None:
        raise CorpusError("data.length_split is not for data=binarized: a data-bin is swept as it is; "
                          "name its long split with data.test_long=<subset>, e.g. test1")
    src, tgt = (None if raw.get(k) in (None, "???") else str(raw[k]) for k in ("src", "tgt"))
    databin = read_databin(raw["dir"], src, tgt, raw.get("test_long"))
    given = {split: str(path) for split, path in (raw.get("references") or {}).items() if path not in (None, "")}
    unknown = sorted(set(given) - set(REFERENCE_SPLITS))
    if unknown:
        raise CorpusError(f"unknown key data.references.{unknown[0]}; allowed: {', '.join(REFERENCE_SPLITS)}")
    if given and set(given) != set(databin.subsets) & set(REFERENCE_SPLITS):
        lacking = sorted((set(databin.subsets) & set(REFERENCE_SPLITS)) ^ set(given))[0]
        raise CorpusError(f"data.references.{lacking}: give the raw references of every scored split or of none "
                          f"(scored: {', '.join(s for s in REFERENCE_SPLITS if s in databin.subsets)})")
    for split, path in given.items():
        if not Path(path).expanduser().is_file():
            raise CorpusError(f"data.references.{split}={path}: no such file")
        lines, expected = len(read_lines(Path(path).expanduser())), databin.sentences(split)
        if expected is not None and lines != expected:
            raise CorpusError(f"data.references.{split}={path} has {lines} lines, the {databin.subsets[split]} split "
                              f"of data.dir={raw['dir']} {expected} sentences; one reference a sentence, in order")
    return databin, {split: str(Path(path).expanduser().resolve()) for split, path in given.items()}


def _int(raw: dict, key: str) -> int:
    """``data.<key>`` as a whole number; CorpusError (one line) for anything else."""
    value = raw[key]
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        return int(value)
    except (TypeError, ValueError):
        raise CorpusError(f"data.{key}={value!r}: must be a whole number") from None


def _build(cls, values: Mapping, where: str):
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise CorpusError(
            f"unknown key {where}.{unknown[0]}; allowed keys: {', '.join(sorted(names))}"
        )
    kwargs = {}
    for key, value in values.items():
        kind = type(names[key].default)
        try:
            kwargs[key] = kind(value)
        except (TypeError, ValueError):
            raise CorpusError(f"{where}.{key}={value!r}: must be a {kind.__name__}") from None
    return cls(**kwargs)
