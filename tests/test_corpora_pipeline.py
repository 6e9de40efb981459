"""The real-data pipeline on generated text: round trip, filtering, cache, bad input."""

import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from posenc.corpora import CorpusError, PreparedCorpus, prepare_corpus
from posenc.corpora.filtering import FilterSettings, filter_pairs
from project import compose_cfg

REPO = Path(__file__).resolve().parents[1]


def synthetic_cfg(**overrides):
    cfg = {
        "name": "synthetic", "recipe": "synthetic", "src": "en", "tgt": "vf",
        # few merges, so many words really are split into subwords
        "subword": "bpe", "subword_size": 60, "joint_subwords": False,
        "normalize_punct": True, "workers": 1,
        "generator": {"seed": 3, "train": 600, "valid": 40, "test": 40, "test_long": 20},
    }
    cfg.update(overrides)
    return cfg


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    logs = []
    prepared = prepare_corpus(synthetic_cfg(), cache, log=logs.append)
    return cache, prepared, logs


def _decode_subset(prepared: PreparedCorpus, subset: str, lang: str) -> list[str]:
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(prepared.bin_dir / f"dict.{lang}.txt"))
    prefix = prepared.bin_dir / f"{subset}.{prepared.src}-{prepared.tgt}.{lang}"
    dataset = data_utils.load_indexed_dataset(str(prefix), dictionary)
    return [dictionary.string(dataset[i]) for i in range(len(dataset))]


@pytest.mark.slow
def test_round_trip_gives_back_the_raw_text(built):
    _, prepared, _ = built
    assert prepared.remove_bpe == "subword_nmt"
    assert prepared.subsets["test"] == "test" and prepared.subsets["test_long"] == "test1"
    for split in ("test", "test_long"):
        subset = prepared.subsets[split]
        refs = prepared.test_refs[split].read_text(encoding="utf-8").splitlines()
        sources = prepared.test_sources[split].read_text(encoding="utf-8").splitlines()
        assert len(refs) == prepared.test_sizes[split] == len(sources)
        target_bpe = _decode_subset(prepared, subset, prepared.tgt)
        assert any("@@" in line for line in target_bpe)  # BPE really split words
        assert prepared.detokenize(prepared.remove_subwords(target_bpe)) == refs
        # the source side goes back the same way with the source language's rules
        source_tok = prepared.remove_subwords(_decode_subset(prepared, subset, prepared.src))
        assert source_tok == prepared.tokenize(sources, side="src")
        assert any(" ," in line or " ." in line for line in source_tok)  # really tokenized


@pytest.mark.slow
def test_tokenize_matches_the_training_text_and_keeps_case(built):
    _, prepared, _ = built
    refs = prepared.test_refs["test"].read_text(encoding="utf-8").splitlines()
    tokenized = prepared.tokenize(refs)
    assert prepared.remove_subwords(_decode_subset(prepared, "test", prepared.tgt)) == tokenized
    assert not prepared.lowercased and any(c.isupper() for c in "".join(tokenized))


@pytest.mark.slow
def test_cache_hit_is_fast_and_a_config_change_is_a_miss(built):
    cache, prepared, logs = built
    assert any("preparing" in line for line in logs)
    hit_logs = []
    started = time.perf_counter()
    again = prepare_corpus(synthetic_cfg(), cache, log=hit_logs.append)
    assert time.perf_counter() - started < 1.0
    assert again == prepared and any("cache hit" in line for line in hit_logs)
    # a preprocessing change and a generator change are both new keys (keys computed only)
    from posenc.corpora.cache import cache_key
    from posenc.corpora.config import parse
    from posenc.corpora.pipeline import _raw_source

    def key_of(cfg):
        parsed = parse(cfg)
        fingerprint, _ = _raw_source(parsed, cache, print)
        return cache_key({"raw": fingerprint, "preprocessing": parsed.preprocessing()})

    assert key_of(synthetic_cfg()) == prepared.cache_key
    assert key_of(synthetic_cfg(subword_size=61)) != prepared.cache_key
    assert key_of(synthetic_cfg(lowercase=True)) != prepared.cache_key
    changed = synthetic_cfg(generator={"seed": 4, "train": 600, "valid": 40, "test": 40,
                                       "test_long": 20})
    assert key_of(changed) != prepared.cache_key


@pytest.mark.slow
def test_concurrent_builds_give_one_valid_entry(tmp_path):
    script = textwrap.dedent(
        """
        import json, sys
        from posenc.corpora import prepare_corpus
        cfg = json.loads(sys.argv[1])
        p = prepare_corpus(cfg, sys.argv[2], log=lambda m: print("LOG", m))
        print("BIN", p.bin_dir)
        """
    )
    cfg = json.dumps(synthetic_cfg(generator={"seed": 5, "train": 300, "valid": 20, "test": 20,
                                              "test_long": 10}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, cfg, str(tmp_path)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    bins = {line for out, _ in outputs for line in out.splitlines() if line.startswith("BIN")}
    assert len(bins) == 1
    built_count = sum("preparing" in out for out, _ in outputs)
    assert built_count == 1  # the other one waited on the lock and found the entry
    entries = list((tmp_path / "corpora").iterdir())
    assert [e.name for e in entries if e.is_dir()] == [Path(bins.pop().split()[1]).parent.name]
    entry = next(e for e in entries if e.is_dir())
    assert (entry / "manifest.json").is_file() and (entry / "bin" / "train.en-vf.en.bin").is_file()


def test_filter_counts_by_reason():
    src = ["a b", "", "a " * 20, "a", "a b c", "x y z w"]
    tgt = ["c d", "x", "b", "a b c d e f g h i j", "d e f", ""]
    kept, stats = filter_pairs(src, tgt, FilterSettings(min_len=1, max_len=10, max_ratio=3))
    assert kept == [0, 4]
    assert stats == {"input": 6, "kept": 2,
                     "removed": {"empty": 2, "too_short": 0, "too_long": 1, "ratio": 1}}
    kept, stats = filter_pairs(["a", "a b c"], ["b", "c d e"], FilterSettings(min_len=2))
    assert kept == [1] and stats["removed"]["too_short"] == 1


def _write(path: Path, lines, gz=False):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        path = Path(str(path) + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def custom_cfg(folder: Path, **overrides):
    cfg = {"name": "custom", "recipe": "custom", "src": "de", "tgt": "en",
           "train": str(folder / "train"), "valid": str(folder / "valid"),
           "test": str(folder / "test"), "subword": "bpe", "subword_size": 50, "workers": 1,
           "filter": {"min_len": 1, "max_len": 12, "max_ratio": 2.0}}
    cfg.update(overrides)
    return cfg


@pytest.mark.slow
def test_custom_files_are_filtered_on_train_only_and_read_from_gzip(tmp_path):
    de = [f"Das ist Satz Nummer {i}." for i in range(40)] + ["", "ein " * 20, "kurz", "Hallo"]
    en = [f"This is sentence number {i}." for i in range(40)] + ["x", "one", "a b c d e f", ""]
    _write(tmp_path / "train.de", de, gz=True)
    _write(tmp_path / "train.en", en)
    # valid and test hold pairs the filter would drop: they must survive whole
    _write(tmp_path / "valid.de", ["Ein Satz.", "", "wort " * 30])
    _write(tmp_path / "valid.en", ["A sentence.", "Empty source.", "word"])
    _write(tmp_path / "test.de", ["Der Hund läuft.", "„Zitat“ – ja", "Zeile"], gz=True)
    # U+2028 inside a sentence is not a line break (str.splitlines would say it is)
    _write(tmp_path / "test.en", ["The dog runs.", "\"Quote\" - yes", "Line\u2028sep"])
    logs = []
    prepared = prepare_corpus(custom_cfg(tmp_path), tmp_path / "cache", log=logs.append)
    assert prepared.filter_stats == {
        "input": 44, "kept": 40, "removed": {"empty": 2, "too_short": 0, "too_long": 1,
                                            "ratio": 1}}
    assert any("kept 40 of 44 training pairs" in line for line in logs)
    assert prepared.sizes == {"train": 40, "valid": 3, "test": 3}
    assert prepared.test_sizes == {"test": 3}
    # references are kept exactly as given (no normalisation of quotes or dashes)
    assert prepared.references("test") == ["The dog runs.", "\"Quote\" - yes", "Line\u2028sep"]
    assert prepared.sources("test") == ["Der Hund läuft.", "„Zitat“ – ja", "Zeile"]
    assert prepared.tokenize(prepared.references("test"))[1:] == ['" Quote " - yes', "Line sep"]


@pytest.mark.usefixtures("without_fairseq_config_store")  # "unset" composes the project's config
@pytest.mark.parametrize("case", ["count", "missing", "utf8", "empty", "same_lang",
                                  "same_text", "unset"])
def test_bad_input_is_refused_with_one_clear_line(tmp_path, case):
    for split in ("train", "valid", "test"):
        _write(tmp_path / f"{split}.de", ["Ein Hund.", "Eine Katze.", "Ein Haus."])
        _write(tmp_path / f"{split}.en", ["A dog.", "A cat.", "A house."])
    cfg = custom_cfg(tmp_path)
    if case == "count":
        _write(tmp_path / "valid.en", ["A dog.", "A cat."])
        expected = [str(tmp_path / "valid.de"), str(tmp_path / "valid.en"), "3 lines", "has 2"]
    elif case == "missing":
        (tmp_path / "test.en").unlink()
        expected = ["not found", str(tmp_path / "test.en")]
    elif case == "utf8":
        (tmp_path / "train.de").write_bytes(b"Ein Hund.\nEine \xff Katze.\nEin Haus.\n")
        expected = [str(tmp_path / "train.de"), "line 2", "UTF-8"]
    elif case == "empty":
        _write(tmp_path / "train.de", [])
        _write(tmp_path / "train.en", [])
        expected = ["empty corpus", str(tmp_path / "train.de")]
    elif case == "same_lang":
        cfg["tgt"] = "de"
        expected = ["data.src and data.tgt are both 'de'"]
    elif case == "same_text":
        _write(tmp_path / "train.en", ["Ein Hund.", "Eine Katze.", "Ein Haus."])
        expected = ["same text on both sides", str(tmp_path / "train.en")]
    else:
        cfg = compose_cfg("data=custom", "data.src=de", "data.tgt=en", "data.valid=v", "data.test=t", hydra=False).data
        expected = ["data.train is not set"]
    with pytest.raises(CorpusError) as info:
        prepare_corpus(cfg, tmp_path / "cache", log=lambda _: None)
    message = str(info.value)
    assert "\n" not in message
    for part in expected:
        assert part in message, message
    # nothing half-built is left in the cache
    assert not list((tmp_path / "cache").glob("corpora/*/manifest.json"))


def test_unknown_keys_and_values_are_refused():
    with pytest.raises(CorpusError, match="unknown key data.subwrd_size"):
        prepare_corpus({**synthetic_cfg(), "subwrd_size": 5}, Path("/nonexistent"))
    with pytest.raises(CorpusError, match="data.subword='wordpiece': allowed values"):
        prepare_corpus(synthetic_cfg(subword="wordpiece"), Path("/nonexistent"))
    with pytest.raises(CorpusError, match="data.recipe='wmt99'"):
        prepare_corpus(synthetic_cfg(recipe="wmt99"), Path("/nonexistent"))
    for key in ("subword_size", "workers"):  # a number that is none: one line, not int()'s ValueError
        with pytest.raises(CorpusError, match=f"^data.{key}='big': must be a whole number$"):
            prepare_corpus({**synthetic_cfg(), key: "big"}, Path("/nonexistent"))


@pytest.mark.usefixtures("without_fairseq_config_store")
def test_every_data_config_parses(tmp_path):
    from posenc.corpora.config import parse

    names = sorted(p.stem for p in (REPO / "conf" / "data").glob("*.yaml"))
    assert names == ["binarized", "custom", "iwslt14_de_en", "multi30k_de_en", "synthetic",
                     "wmt14_en_de", "wmt16_en_ro"]
    names.remove("binarized")  # its node reads a data-bin: tests/test_binarized.py parses it on real ones

    def data(name, *overrides):  # a preset as posenc-run composes it (over posenc_data_schema)
        return compose_cfg(f"data={name}", *overrides, hydra=False).data

    for name in names:
        node = data(name, *(("data.train=a", "data.valid=b", "data.test=c", "data.src=de", "data.tgt=en")
                            if name == "custom" else ()))
        assert node.name == name
        parsed = parse(node)
        assert parsed.src != parsed.tgt
    iwslt = parse(data("iwslt14_de_en"))
    assert iwslt.text.lowercase and iwslt.subwords.size == 10000
    assert (iwslt.filter.min_len, iwslt.filter.max_len, iwslt.filter.max_ratio) == (1, 175, 1.5)
    wmt = parse(data("wmt14_en_de"))
    assert wmt.subwords.size == 40000 and wmt.joined_dictionary and wmt.subwords.joint
