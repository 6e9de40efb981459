"""``data=binarized data.dir=DIR``: a data-bin written by stock ``fairseq-preprocess`` swept as it is (the
languages from its files, joined or separate dictionaries, the splits it holds), scored against raw
references where given, else against DIR's own targets with the subword marks removed (BLEU on tokenized
text, said by the record, the table and the signature); a DIR without fairseq data, or without a split,
refused in one line before any cell."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.corpora import CorpusError, parse_corpus_config, prepare_corpus, subwords, synthetic
from posenc.corpora.moses import TextSettings, tokenize_lines
from posenc.corpora.textio import write_lines
from project import compose_cell, posenc_run, summary_line

BIN = Path(sys.executable).parent
BPE = subwords.SubwordSettings(size=200)


def make_databin(out: Path, joined: bool, pairs=(("de", "en"),)) -> Path:
    """A small data-bin of the project's synthetic corpus, Moses-tokenized and BPE-segmented, binarized by
    the venv's own ``fairseq-preprocess`` (test and test1, the long split); beside it the segmented text
    (``text/``) and the raw text (``raw.<split>.<lang>``)."""
    corpus = synthetic.generate(synthetic.GeneratorConfig(train=300, valid=40, test=30, test_long=20))
    text = out / "text"
    for src, tgt in pairs:
        tok = {split: [tokenize_lines(side, lang, TextSettings()) for side, lang in zip(corpus[split], ("de", "en"))]
               for split in corpus}
        models = subwords.learn(BPE, {"de": tok["train"][0], "en": tok["train"][1]}, text / "bpe")
        for split in corpus:
            for index, lang in enumerate(("de", "en")):
                name = {"de": src, "en": tgt}[lang]
                write_lines(text / f"{split}.{name}", subwords.apply(BPE, models[lang], tok[split][index], 1))
                write_lines(out / f"raw.{split}.{name}", corpus[split][index])
        argv = [str(BIN / "fairseq-preprocess"), "--source-lang", src, "--target-lang", tgt,
                "--trainpref", str(text / "train"), "--validpref", str(text / "valid"),
                "--testpref", f"{text / 'test'},{text / 'test_long'}", "--destdir", str(out / "bin"), "--workers", "1"]
        shared = out / "bin" / f"dict.{tgt}.txt"  # a second pair reuses the target's dictionary (fairseq's README)
        argv += ["--joined-dictionary"] if joined else ["--tgtdict", str(shared)] if shared.exists() else []
        proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "bin"


@pytest.fixture(scope="module")
def databins(tmp_path_factory):
    root = tmp_path_factory.mktemp("databins")
    two = make_databin(root / "two", False, pairs=(("de", "en"), ("fr", "en")))  # separate dictionaries, two pairs
    return {"joined": make_databin(root / "joined", True), "separate": two, "two_pairs": two}


def data(path, **keys):
    return {"name": "binarized", "recipe": "binarized", "dir": str(path), "src": None, "tgt": None,
            "test_long": None, "references": {"test": None, "test_long": None}, **keys}


def test_the_pair_and_the_dictionaries_are_read_from_dir(databins):
    joined = parse_corpus_config(data(databins["joined"]))
    separate = parse_corpus_config(data(databins["separate"], tgt="de"))
    assert (joined.src, joined.tgt, joined.databin.joined_dictionary) == ("de", "en", True)
    assert (separate.src, separate.tgt, separate.databin.joined_dictionary) == ("en", "de", False)
    assert separate.databin.pair == "de-en"  # stored de-en, trained en -> de: fairseq reads either direction
    assert parse_corpus_config(data(databins["separate"], src="de")).tgt == "en"
    with pytest.raises(CorpusError, match=r"holds several pairs \(de-en, fr-en\): choose one with data.src"):
        parse_corpus_config(data(databins["two_pairs"]))
    fr = parse_corpus_config(data(databins["two_pairs"], src="fr"))
    assert (fr.src, fr.tgt, fr.databin.pair) == ("fr", "en", "fr-en")
    assert fr.databin.sentences("test") == 30 and fr.databin.sentences("train") == 300


@pytest.mark.parametrize("change,message", [
    (lambda d: [p.unlink() for p in d.iterdir()], "holds no fairseq data"),
    (lambda d: [p.unlink() for p in d.glob("test.de-en.*")], "lacks the test split of de-en: no test.de-en.de.bin"),
    (lambda d: (d / "dict.de.txt").unlink(), "has no dictionary dict.de.txt"),
])
def test_a_dir_without_what_a_cell_needs_is_refused_in_one_line(databins, tmp_path, change, message):
    broken = shutil.copytree(databins["separate"], tmp_path / "bin")
    change(broken)
    with pytest.raises(CorpusError, match=message) as err:
        parse_corpus_config(data(broken, src="de"))
    assert "\n" not in str(err.value)
    with pytest.raises(CorpusError, match=r"lacks the test7 split \(data.test_long\)"):
        parse_corpus_config(data(databins["joined"], test_long="test7"))
    with pytest.raises(CorpusError, match="no such directory"):
        parse_corpus_config(data(tmp_path / "nowhere"))


def test_references_are_every_scored_splits_with_a_line_a_sentence(databins):
    root = databins["joined"].parent
    with pytest.raises(CorpusError, match="raw.test_long.en has 20 lines, the test split .* 30 sentences"):
        parse_corpus_config(data(databins["joined"], references={"test": str(root / "raw.test_long.en")}))
    with pytest.raises(CorpusError, match="data.references.test_long: give the raw references of every scored"):
        parse_corpus_config(data(databins["joined"], test_long="test1", references={"test": str(root / "raw.test.en")}))


def as_fed(databin: Path, split: str, lang: str, unk: str) -> list:
    """The segmented text fed to fairseq-preprocess, each word its dictionary lacks as ``unk`` (as
    fairseq-generate prints a source's unknown word, and a reference's), BPE's marks removed."""
    entries = (databin / f"dict.{lang}.txt").read_text(encoding="utf-8").splitlines()
    vocabulary = {line.split(" ")[0] for line in entries}
    fed = (databin.parent / "text" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
    return [" ".join(w if w in vocabulary else unk for w in line.split()).replace("@@ ", "") for line in fed]


def test_without_references_dirs_own_targets_are_the_references_and_the_content_names_the_corpus(databins, tmp_path):
    """The entry's references are exactly the text fed to fairseq-preprocess with BPE's marks removed."""
    prepared = prepare_corpus(data(databins["joined"], test_long="test1"), tmp_path / "cache", log=lambda _: None)
    for split in ("test", "test_long"):
        assert prepared.references(split) == as_fed(databins["joined"], split, "en", "<<unk>>")
        assert prepared.sources(split) == as_fed(databins["joined"], split, "de", "<unk>")
    assert prepared.bin_dir == databins["joined"] and prepared.subsets["test_long"] == "test1"
    assert (prepared.bleu_on, prepared.remove_bpe, prepared.test_sizes) == \
        ("tokenized", "subword_nmt", {"test": 30, "test_long": 20})
    assert prepared.record()["databin"] == {"dir": str(databins["joined"]), "pair": "de-en", "joined_dictionary": True}
    moved = shutil.copytree(databins["joined"], tmp_path / "moved")
    again = prepare_corpus(data(moved, test_long="test1"), tmp_path / "cache", log=lambda _: None)
    assert again.cache_key == prepared.cache_key and again.bin_dir == moved  # the content, wherever it lies
    with open(moved / "train.de-en.en.bin", "ab") as handle:
        handle.write(b"\0\0")
    changed = prepare_corpus(data(moved, test_long="test1"), tmp_path / "cache", log=lambda _: None)
    assert changed.cache_key != prepared.cache_key


@pytest.mark.usefixtures("without_fairseq_config_store")  # the config is composed here
def test_the_cells_fairseq_lines_name_the_pair(databins):
    cell = compose_cell("data=binarized", f"data.dir={databins['two_pairs']}", "data.src=fr")
    from posenc.harness.config.commands import generate_command, train_command
    train = train_command(databins["two_pairs"], "ckpt", cell)
    generate = generate_command(databins["two_pairs"], "ckpt/checkpoint_best.pt", "test", "subword_nmt", cell)
    for argv in (train, generate):
        assert argv[argv.index("--source-lang") + 1:argv.index("--source-lang") + 4] == ["fr", "--target-lang", "en"]


@pytest.mark.slow
def test_a_data_bin_swept_two_cells_scored_on_its_own_targets(databins, tmp_path):
    proc = posenc_run("-m", "data=binarized", f"data.dir={databins['joined']}", "placement=both,none",
                      "budget=smoke", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary_line(proc.stdout) == "2 cells: 2 ok"
    (sweep,) = (tmp_path / "results" / "sweeps").iterdir()
    records = [json.loads(p.read_text()) for p in sweep.glob("*/result.json")]
    assert len(records) == 2 and all(r["status"] == "ok" and r["bleu"] is not None for r in records)
    assert all(r["bleu_signature"].endswith("tok:none|smooth:exp|version:2.6.0|text:tokenized") for r in records)
    assert all(r["corpus"]["bleu_on"] == "tokenized" and r["test_sentences"] == 30 for r in records)
    table = (sweep / "table.md").read_text()
    assert "BLEU: sacreBLEU on tokenized text where the signature says text:tokenized" in table
    assert "BLEU on tokenized text" in proc.stdout  # the compact table's caption
    assert "--source-lang de --target-lang en" in next(sweep.glob("*/commands.sh")).read_text()


@pytest.mark.slow
def test_raw_references_score_detokenized_output_and_a_bad_dir_is_refused_before_any_cell(databins, tmp_path):
    root = databins["separate"].parent
    proc = posenc_run("data=binarized", f"data.dir={databins['separate']}", "data.src=de",
                      f"data.references.test={root}/raw.test.en", "budget=smoke", "budget.max_update=2",
                      "hydra.run.dir=one", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "one" / "result.json").read_text())
    assert record["status"] == "ok" and "tok:13a" in record["bleu_signature"] and "text:tokenized" not in \
        record["bleu_signature"] and record["corpus"]["bleu_on"] == "detokenized"
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = posenc_run("-m", "data=binarized", f"data.dir={empty}", "placement=both,none", "budget=smoke",
                      cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"posenc-run: error: data.dir={empty} holds no fairseq data: no dict.<lang>.txt and "
        "<split>.<src>-<tgt>.<lang>.bin/.idx files (what fairseq-preprocess writes)")
    assert not (tmp_path / "results").exists()  # no cell ran, no sweep directory was made


def test_a_swept_data_dir_and_a_swept_pair_are_refused_before_any_cell(databins, tmp_path):
    """``data.dir=A,B`` never names a cell (its cells would share one directory): refused at the start, as
    is ``data.src=de,fr`` where A holds no ``fr`` pair (each swept value checked, not by its cells), and a
    data key swept over a range."""
    other = tmp_path / "other"
    shutil.copytree(databins["joined"], other)
    for sweep, line in ((f"data.dir={databins['joined']},{other}",
                         f"posenc-run: error: data.dir={databins['joined']},{other} is swept, but data.dir never names "
                         "a cell's directory (posenc/cells/keys.py), so its cells would share theirs: run one sweep "
                         "per value (each names its sweep's directory)"),
                        ("data.src=de,fr", f"posenc-run: error: data.dir={databins['joined']} holds no fr pair (it "
                                           "holds de-en)"),
                        ("data.src=interval(1,2)", "posenc-run: error: data.src: only a list of values can be swept "
                                                   "here (got data.src=interval(1,2))")):
        dirs = [] if sweep.startswith("data.dir") else [f"data.dir={databins['joined']}"]
        proc = posenc_run("-m", "data=binarized", *dirs, sweep, "placement=both", "budget=smoke", cwd=tmp_path,
                          cache=tmp_path / "cache")
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert proc.stderr.strip().splitlines()[-1] == line
        assert not (tmp_path / "results").exists()  # no cell ran, no sweep directory was made
