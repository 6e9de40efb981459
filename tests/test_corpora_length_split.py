"""data.length_split: any corpus split by source length into train and valid up to L tokens and a
held-out test_long beyond, checked against corpora generated here with known sentence lengths."""

import json
import random
import subprocess
from pathlib import Path

import pytest

from posenc.corpora import CorpusError, prepare_corpus
from posenc.corpora.config import parse
from posenc.corpora.length_split import MIN_LONG_PAIRS, LengthSplit, split_by_length

# Word-for-word pairs, so a sentence of n words is n + 1 Moses tokens on both sides (the full stop).
WORDS = {"haus": "house", "baum": "tree", "katze": "cat", "hund": "dog", "wasser": "water", "garten": "garden",
         "strasse": "street", "kinder": "children", "wiese": "meadow", "fenster": "window", "tisch": "table",
         "vogel": "bird", "himmel": "sky", "wolke": "cloud", "boot": "boat", "berge": "mountains"}


def pair(rng, words):
    src = [rng.choice(sorted(WORDS)) for _ in range(words)]
    return " ".join(src).capitalize() + ".", " ".join(WORDS[w] for w in src).capitalize() + "."


def write_corpus(folder: Path, sizes=(("train", 1500), ("valid", 100), ("test", 30)), seed=5):
    """Files <split>.de / <split>.en of 3-30 words a sentence; returns {split: [(de, en, tokens)]}."""
    rng = random.Random(seed)
    corpus = {}
    for split, size in sizes:
        pairs = [pair(rng, rng.randint(3, 30)) for _ in range(size)]
        corpus[split] = [(de, en, len(de.split()) + 1) for de, en in pairs]
        for lang, column in (("de", 0), ("en", 1)):
            (folder / f"{split}.{lang}").write_text("".join(p[column] + "\n" for p in pairs), encoding="utf-8")
    return corpus


def custom_cfg(folder: Path, **overrides):
    cfg = {"name": "custom", "recipe": "custom", "src": "de", "tgt": "en", "train": str(folder / "train"),
           "valid": str(folder / "valid"), "test": str(folder / "test"), "subword": "bpe", "subword_size": 30,
           "workers": 1}
    cfg.update(overrides)
    return cfg


def largest_allowed(corpus) -> int:
    """By brute force: the largest L that leaves MIN_LONG_PAIRS train and valid pairs longer than L."""
    lengths = [n for split in ("train", "valid") for *_, n in corpus[split]]
    return max(limit for limit in range(1, max(lengths) + 1) if sum(n > limit for n in lengths) >= MIN_LONG_PAIRS)


# -- the split itself, on pairs of known lengths ----------------------------------------------------
def known_pairs(lengths_by_split):
    """raw: "<split> <i>" / "T <split> <i>"; tokenized: as many tokens as the given length."""
    raw = {s: ([f"{s} {i}" for i in range(len(ls))], [f"T {s} {i}" for i in range(len(ls))])
           for s, ls in lengths_by_split.items()}
    tok = {s: (["x " * n for n in ls], ["y " * (n + 1) for n in ls]) for s, ls in lengths_by_split.items()}
    return raw, tok


def test_train_and_valid_keep_up_to_l_and_every_longer_pair_is_held_out_in_order():
    rng = random.Random(0)
    lengths = {"train": [rng.randint(2, 40) for _ in range(1400)], "valid": [rng.randint(2, 40) for _ in range(120)],
               "test": [rng.randint(2, 40) for _ in range(50)]}
    raw, tok = known_pairs(lengths)
    new_raw, new_tok, stats = split_by_length(LengthSplit(20), raw, tok, "toy")
    for split in ("train", "valid"):
        assert new_raw[split][0] == [f"{split} {i}" for i, n in enumerate(lengths[split]) if n <= 20]
        assert all(len(line.split()) <= 20 for line in new_tok[split][0])
    long = [f"{s} {i}" for s in ("train", "valid") for i, n in enumerate(lengths[s]) if n > 20]
    assert new_raw["test_long"][0] == long and len(long) >= MIN_LONG_PAIRS
    assert new_raw["test_long"][1] == ["T " + line for line in long]  # the pairs stay pairs
    assert new_raw["test"] == raw["test"] and new_tok["test"] == tok["test"]  # the test set stays whole
    assert min(len(line.split()) for line in new_tok["test_long"][0]) > max(
        len(line.split()) for line in new_tok["train"][0])
    assert stats["long_pairs"] == stats["test_long"] == len(long)
    assert stats["test_long_from"] == {s: sum(n > 20 for n in lengths[s]) for s in ("train", "valid")}
    assert stats["train_max_source_tokens"] == max(n for n in lengths["train"] if n <= 20)
    assert stats["test_longer_than_split"] == sum(n > 20 for n in lengths["test"])
    assert stats["train_max_target_tokens"] == stats["train_max_source_tokens"] + 1
    assert stats["test_long_target_longer"] == len(long)  # targets here are one token longer than sources


def test_a_capped_long_split_is_evenly_spaced_over_the_long_pairs():
    lengths = {"train": [30] * 900 + [5] * 100, "valid": [5] * 10, "test": [5]}
    raw, tok = known_pairs(lengths)
    new_raw, _, stats = split_by_length(LengthSplit(10, test_long_size=600), raw, tok, "toy")
    picked = [int(line.split()[1]) for line in new_raw["test_long"][0]]
    assert len(picked) == len(set(picked)) == 600 == stats["test_long"] and stats["long_pairs"] == 900
    assert picked == sorted(picked) and picked[0] == 0
    gaps = {b - a for a, b in zip(picked, picked[1:])}
    assert gaps <= {1, 2}  # 900 over 600: every 1.5th pair
    assert new_raw["train"][0] == [f"train {i}" for i in range(900, 1000)]  # the rest are not trained on either


def test_split_by_both_sides_holds_out_pairs_longer_on_both_and_drops_the_mixed_ones():
    rng = random.Random(1)
    lengths = {split: [(rng.randint(2, 40), rng.randint(2, 40)) for _ in range(size)]
               for split, size in (("train", 1600), ("valid", 100), ("test", 30))}
    raw = {s: ([f"{s} {i}" for i in range(len(ls))], [f"T {s} {i}" for i in range(len(ls))])
           for s, ls in lengths.items()}
    tok = {s: (["x " * a for a, _ in ls], ["y " * b for _, b in ls]) for s, ls in lengths.items()}
    new_raw, new_tok, stats = split_by_length(LengthSplit(18, by="both"), raw, tok, "toy")
    for split in ("train", "valid"):
        assert new_raw[split][0] == [f"{split} {i}" for i, (a, b) in enumerate(lengths[split]) if a <= 18 and b <= 18]
    long = [f"{s} {i}" for s in ("train", "valid") for i, (a, b) in enumerate(lengths[s]) if a > 18 and b > 18]
    assert new_raw["test_long"][0] == long
    for side in (0, 1):  # longer than every training pair on both sides, as the synthetic long split
        assert min(len(line.split()) for line in new_tok["test_long"][side]) > max(
            len(line.split()) for line in new_tok["train"][side])
    assert stats["test_long_target_longer"] == len(long) and stats["by"] == "both"
    assert stats["dropped"] == {s: sum((a <= 18) != (b <= 18) for a, b in lengths[s]) for s in ("train", "valid")}
    assert stats["test_longer_than_split"] == sum(a > 18 and b > 18 for a, b in lengths["test"])


# -- bad values: one line, naming the value and what is allowed ------------------------------------
@pytest.mark.parametrize("overrides,expected", [
    ({"length_split": 0}, "data.length_split=0: must be a whole number >= 1"),
    ({"length_split": "long"}, "data.length_split='long': must be a whole number >= 1"),
    ({"length_split": 2.5}, "data.length_split=2.5: must be a whole number >= 1"),
    ({"length_split": True}, "data.length_split=True: must be a whole number >= 1"),
    ({"length_split": 20, "test_long_size": 499}, "data.test_long_size=499: must be a whole number >= 500"),
    ({"test_long_size": 800}, "data.test_long_size=800 needs data.length_split=L"),
    ({"length_split": 20, "length_split_by": "target"},
     "data.length_split_by='target': allowed values are source, both"),
])
def test_bad_values_are_refused_before_any_work(overrides, expected):
    with pytest.raises(CorpusError) as info:
        prepare_corpus(custom_cfg(Path("/nonexistent"), **overrides), Path("/nonexistent"))
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_the_synthetic_corpus_splits_by_length_only_without_its_own_long_split():
    synthetic = {"name": "synthetic", "recipe": "synthetic", "src": "en", "tgt": "vf", "length_split": 12}
    with pytest.raises(CorpusError, match=r"data.length_split=12: the synthetic corpus already has a test_long "
                                          r"split \(data.generator.test_long=500\); set data.generator.test_long=0"):
        parse(synthetic)
    assert parse({**synthetic, "generator": {"test_long": 0}}).length_split == LengthSplit(12)


@pytest.mark.parametrize("case", ["too_few_long", "no_train"])
def test_a_limit_this_corpus_cannot_split_at_names_the_ones_it_can(tmp_path, case):
    corpus = write_corpus(tmp_path)
    most = largest_allowed(corpus)
    least = max(min(n for *_, n in corpus[s]) for s in ("train", "valid"))
    limit = most + 1 if case == "too_few_long" else least - 1
    with pytest.raises(CorpusError) as info:
        prepare_corpus(custom_cfg(tmp_path, length_split=limit), tmp_path / "cache", log=lambda _: None)
    message = str(info.value)
    assert "\n" not in message and f"data.length_split={limit} " in message
    assert f"allowed for custom: {least} to {most}" in message
    if case == "too_few_long":
        longer = sum(n > limit for s in ("train", "valid") for *_, n in corpus[s])
        assert f"leaves {longer} train and valid pairs longer than {limit} source tokens" in message
    else:
        assert "keeps no train pair" in message
    assert not list((tmp_path / "cache").glob("corpora/*/manifest.json"))  # nothing half-built


# -- a prepared corpus, as the harness reads it ----------------------------------------------------
@pytest.mark.slow
def test_a_length_split_corpus_is_prepared_and_cached_like_the_synthetic_long_split(tmp_path):
    from fairseq.data import Dictionary, data_utils

    corpus = write_corpus(tmp_path)
    limit = 20
    logs = []
    prepared = prepare_corpus(custom_cfg(tmp_path, length_split=limit), tmp_path / "cache", log=logs.append)
    long = [p for s in ("train", "valid") for p in corpus[s] if p[2] > limit]
    assert prepared.subsets["test_long"] == "test1" and prepared.test_splits == ["test", "test_long"]
    assert prepared.sizes == {"train": sum(p[2] <= limit for p in corpus["train"]),
                              "valid": sum(p[2] <= limit for p in corpus["valid"]), "test": len(corpus["test"]),
                              "test_long": len(long)}
    assert prepared.references("test_long") == [en for _, en, _ in long]  # as given, in corpus order
    assert prepared.sources("test_long") == [de for de, _, _ in long]
    assert prepared.references("test") == [en for _, en, _ in corpus["test"]]  # the test set whole

    def tokens(subset):
        dictionary = Dictionary.load(str(prepared.bin_dir / "dict.de.txt"))
        dataset = data_utils.load_indexed_dataset(str(prepared.bin_dir / f"{subset}.de-en.de"), dictionary)
        lines = prepared.remove_subwords([dictionary.string(dataset[i]) for i in range(len(dataset))])
        return [len(line.split()) for line in lines]

    # what the model trains on and is tested on, read back from fairseq's binarized data
    assert max(tokens("train") + tokens("valid")) <= limit < min(tokens("test1"))
    assert tokens("test1") == [n for *_, n in long]
    split = prepared.record()["length_split"]
    assert split["max_tokens"] == limit and split["test_long"] == len(long) >= MIN_LONG_PAIRS
    assert json.loads((prepared.bin_dir.parent / "manifest.json").read_text())["length_split"] == split
    assert any(f"length split at {limit} source tokens" in line for line in logs)

    hit = []
    assert prepare_corpus(custom_cfg(tmp_path, length_split=limit), tmp_path / "cache", log=hit.append) == prepared
    assert any("cache hit" in line for line in hit)
    capped = prepare_corpus(custom_cfg(tmp_path, length_split=limit, test_long_size=500), tmp_path / "cache",
                            log=lambda _: None)
    assert capped.cache_key != prepared.cache_key and capped.test_sizes["test_long"] == 500


def test_a_corpus_without_the_option_keeps_its_cache_key(tmp_path):
    # the keys at null are the corpus as it was before they existed: the same preprocessing, the same key
    before = custom_cfg(tmp_path)  # no length_split keys at all
    now = custom_cfg(tmp_path, length_split=None, test_long_size=None)
    assert parse(now).preprocessing() == parse(before).preprocessing()
    assert parse(custom_cfg(tmp_path, length_split=20)).preprocessing() != parse(before).preprocessing()


@pytest.mark.usefixtures("without_fairseq_config_store")
def test_a_cell_without_a_length_split_keeps_its_hashes():
    from omegaconf import OmegaConf, open_dict

    from posenc.harness.hashing import config_hash, training_hash
    from project import compose_cfg

    cfg = compose_cfg("data=multi30k_de_en", "model=transformer_small", hydra=False)
    before = cfg.copy()  # the same cell as composed before the keys existed
    with open_dict(before):
        for key in ("length_split", "test_long_size", "length_split_by"):
            del before.data[key]
    assert OmegaConf.select(cfg, "data.length_split") is None
    assert config_hash(cfg) == config_hash(before) and training_hash(cfg) == training_hash(before)
    split = compose_cfg("data=multi30k_de_en", "model=transformer_small", "data.length_split=23", hydra=False)
    assert config_hash(split) != config_hash(cfg) and training_hash(split) != training_hash(cfg)


@pytest.mark.slow
def test_posenc_run_scores_the_long_split_and_the_report_reads_it_unchanged(tmp_path):
    from project import BIN, posenc_run

    write_corpus(tmp_path)
    sweep = tmp_path / "sweep"
    data = ["data=custom", f"data.train={tmp_path / 'train'}", f"data.valid={tmp_path / 'valid'}",
            f"data.test={tmp_path / 'test'}", "data.src=de", "data.tgt=en", "data.length_split=20",
            "data.test_long_size=500"]
    # a short output bound: an untrained model's 500 long hypotheses stay cheap
    generation = ["generation.test_long=true", "generation.beam=1", "generation.max_len_a=1", "generation.max_len_b=2"]
    for placement in ("both", "none"):  # two cells of one directory, each run as a user runs one
        proc = posenc_run("model=transformer_small", "pe=sinusoidal", f"placement={placement}", "budget=smoke",
                          *generation, *data, f"hydra.run.dir={sweep / placement}", cwd=tmp_path,
                          cache=tmp_path / "cache")
        assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/result.json"))]
    assert len(records) == 2
    for record in records:
        assert record["status"] == "ok", record["error"]
        assert record["test_sentences_test_long"] == 500 and record["test_sentences"] == 30
        assert record["bleu_test_long"] is not None and record["chrf_test_long"] is not None
        assert record["corpus"]["length_split"]["max_tokens"] == 20
        hypotheses = Path(record["job_dir"]) / record["hypotheses_test_long"]
        assert len(hypotheses.read_text(encoding="utf-8").split("\n")) - 1 == 500
    table = subprocess.run([str(BIN / "posenc-table"), str(sweep)], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    for column in ("BLEU long split", "Δ long", "verdict long", "BLEU 1-"):
        assert column in table.stdout, table.stdout
