"""Download recipes: where each public corpus lives and how its raw text is extracted.

Each recipe turns its official archives into plain raw split files ({split}.{lang}, one
sentence a line, untokenized) following fairseq's prepare-*.sh scripts; the shared pipeline
(tokenize, filter, subwords, binarize) then treats them like a user's own files.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from .download import download
from .errors import CorpusError
from .textio import write_lines


@dataclass(frozen=True)
class Download:
    url: str
    filename: str


SplitFiles = dict[str, dict[str, Path]]  # {split: {lang: raw file}}


@dataclass(frozen=True)
class Recipe:
    name: str
    langs: frozenset[str]
    downloads: tuple[Download, ...]
    # (downloaded files by name, output folder, src, tgt) -> raw split files
    extract: Callable[[dict[str, Path], Path, str, str], SplitFiles]
    version: int = 1


# -- archive helpers ------------------------------------------------------------------------
def _archive_lines(archive: Path, pattern: str) -> list[str]:
    """Lines of the one member of a .tgz/.zip whose base name matches `pattern` (a regex)."""
    regex = re.compile(pattern)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if regex.fullmatch(Path(name).name):
                    return _decode(zf.read(name), archive, name)
    else:
        with tarfile.open(archive) as tar:
            for member in tar:
                if member.isfile() and regex.fullmatch(Path(member.name).name):
                    return _decode(tar.extractfile(member).read(), archive, member.name)
    raise CorpusError(
        f"{archive}: no member matching {pattern!r}; the download may be damaged or the site "
        f"changed (delete it and run again)"
    )


def _decode(data: bytes, archive: Path, member: str) -> list[str]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, raw in enumerate(lines, start=1):
        try:
            out.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError:
            raise CorpusError(f"{archive}:{member}: line {number} is not valid UTF-8") from None
    return out


_SEG = re.compile(r"<seg id=\"?\d+\"?>\s*(.*?)\s*</seg>")


def _segments(lines: list[str]) -> list[str]:
    """The sentences of an IWSLT .xml / WMT .sgm file, as fairseq's scripts extract them."""
    return [m.group(1) for line in lines if (m := _SEG.search(line))]


def _every_nth(src: list[str], tgt: list[str], n: int):
    """fairseq's `awk 'NR%n==0'` split: every n-th pair to valid, the rest to train."""
    train = ([s for i, s in enumerate(src, 1) if i % n], [t for i, t in enumerate(tgt, 1) if i % n])
    valid = ([s for i, s in enumerate(src, 1) if not i % n],
             [t for i, t in enumerate(tgt, 1) if not i % n])
    return train, valid


def _write_splits(out: Path, splits: dict[str, dict[str, list[str]]]) -> SplitFiles:
    files: SplitFiles = {}
    for split, sides in splits.items():
        files[split] = {}
        for lang, lines in sides.items():
            path = out / f"{split}.{lang}"
            write_lines(path, lines)
            files[split][lang] = path
    return files


# -- recipes --------------------------------------------------------------------------------
MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"


def _extract_multi30k(files, out, src, tgt) -> SplitFiles:
    # The official files are already one sentence a line; they are read as they are (gzip).
    return {
        split: {lang: files[f"{stem}.{lang}.gz"] for lang in (src, tgt)}
        for split, stem in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr"))
    }


_IWSLT_DROP = ("<url>", "<talkid>", "<keywords>", "<speaker>", "<reviewer", "<translator",
               "<doc", "</doc>")
_IWSLT_TAGS = re.compile(r"</?(title|description)>")
_IWSLT_TESTS = ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010",
                "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012")


def _extract_iwslt14(files, out, src, tgt) -> SplitFiles:
    archive = files["de-en.tgz"]
    train = {}
    for lang in (src, tgt):
        lines = _archive_lines(archive, rf"train\.tags\.de-en\.{lang}")
        train[lang] = [
            _IWSLT_TAGS.sub("", line).strip()
            for line in lines
            if not any(tag in line for tag in _IWSLT_DROP)
        ]
    (tr_src, tr_tgt), (va_src, va_tgt) = _every_nth(train[src], train[tgt], 23)
    test = {
        lang: [s for name in _IWSLT_TESTS
               for s in _segments(_archive_lines(archive, rf"{re.escape(name)}\.de-en\.{lang}\.xml"))]
        for lang in (src, tgt)
    }
    return _write_splits(out, {
        "train": {src: tr_src, tgt: tr_tgt},
        "valid": {src: va_src, tgt: va_tgt},
        "test": test,
    })


def _concat(archives: list[tuple[Path, str]], lang: str) -> list[str]:
    return [line for archive, stem in archives
            for line in _archive_lines(archive, rf"{re.escape(stem)}\.{lang}")]


def _extract_wmt14(files, out, src, tgt) -> SplitFiles:
    corpora = [
        (files["training-parallel-europarl-v7.tgz"], "europarl-v7.de-en"),
        (files["training-parallel-commoncrawl.tgz"], "commoncrawl.de-en"),
        (files["training-parallel-nc-v9.tgz"], "news-commentary-v9.de-en"),
    ]
    text = {lang: _concat(corpora, lang) for lang in (src, tgt)}
    _check_parallel(text, src, tgt, "wmt14 training archives")
    (tr_src, tr_tgt), (va_src, va_tgt) = _every_nth(text[src], text[tgt], 100)
    test = {
        lang: _segments(_archive_lines(
            files["test-full.tgz"], rf"newstest2014-deen-{'src' if lang == src else 'ref'}\.{lang}\.sgm"))
        for lang in (src, tgt)
    }
    return _write_splits(out, {
        "train": {src: tr_src, tgt: tr_tgt},
        "valid": {src: va_src, tgt: va_tgt},
        "test": test,
    })


def _extract_wmt16_en_ro(files, out, src, tgt) -> SplitFiles:
    corpora = [(files["ro-en.tgz"], "europarl-v8.ro-en"), (files["en-ro.txt.zip"], "SETIMES.en-ro")]
    text = {lang: _concat(corpora, lang) for lang in (src, tgt)}
    _check_parallel(text, src, tgt, "wmt16 training archives")
    pair = f"{src}{tgt}"  # newsdev2016-enro-src.en.sgm / newsdev2016-roen-src.ro.sgm

    def sgm(archive, stem, lang):
        kind = "src" if lang == src else "ref"
        return _segments(_archive_lines(files[archive], rf"{stem}-{pair}-{kind}\.{lang}\.sgm"))

    return _write_splits(out, {
        "train": text,
        "valid": {lang: sgm("dev.tgz", "newsdev2016", lang) for lang in (src, tgt)},
        "test": {lang: sgm("test.tgz", "newstest2016", lang) for lang in (src, tgt)},
    })


def _check_parallel(text, src, tgt, what) -> None:
    if len(text[src]) != len(text[tgt]):
        raise CorpusError(
            f"{what}: {len(text[src])} {src} lines but {len(text[tgt])} {tgt} lines; the "
            f"download may be damaged (delete it and run again)"
        )


RECIPES: dict[str, Recipe] = {
    "multi30k": Recipe(
        "multi30k", frozenset({"de", "en"}),
        tuple(Download(f"{MULTI30K_URL}/{stem}.{lang}.gz", f"{stem}.{lang}.gz")
              for stem in ("train", "val", "test_2016_flickr") for lang in ("de", "en")),
        _extract_multi30k,
    ),
    "iwslt14": Recipe(
        "iwslt14", frozenset({"de", "en"}),
        (Download("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz", "de-en.tgz"),),
        _extract_iwslt14,
    ),
    "wmt14_en_de": Recipe(
        "wmt14_en_de", frozenset({"de", "en"}),
        (
            Download("http://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
                     "training-parallel-europarl-v7.tgz"),
            Download("http://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
                     "training-parallel-commoncrawl.tgz"),
            # news-commentary v9: fairseq's --icml17 variant, the data of Gehring et al. (2017)
            Download("http://statmt.org/wmt14/training-parallel-nc-v9.tgz",
                     "training-parallel-nc-v9.tgz"),
            Download("http://statmt.org/wmt14/test-full.tgz", "test-full.tgz"),
        ),
        _extract_wmt14,
    ),
    "wmt16_en_ro": Recipe(
        "wmt16_en_ro", frozenset({"en", "ro"}),
        (
            Download("http://www.statmt.org/europarl/v8/ro-en.tgz", "ro-en.tgz"),
            Download("http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip",
                     "en-ro.txt.zip"),
            Download("http://data.statmt.org/wmt16/translation-task/dev.tgz", "dev.tgz"),
            Download("http://data.statmt.org/wmt16/translation-task/test.tgz", "test.tgz"),
        ),
        _extract_wmt16_en_ro,
    ),
}


def recipe_raw_files(
    recipe: Recipe, src: str, tgt: str, cache_root: Path, mirror: str | None, log
) -> SplitFiles:
    """Download (once) and extract (once) a recipe's corpus; return its raw split files.

    `mirror`, when set, replaces each URL by `<mirror>/<filename>` (a local folder as
    file:///path, or an internal server), for offline machines and for tests.
    """
    if {src, tgt} != set(recipe.langs):
        raise CorpusError(
            f"data.src={src!r}, data.tgt={tgt!r}: recipe {recipe.name} covers the languages "
            f"{' and '.join(sorted(recipe.langs))}"
        )
    raw_dir = cache_root / "raw" / f"{recipe.name}.{src}-{tgt}.v{recipe.version}"
    done = raw_dir / "complete.json"
    if done.is_file():  # fast path: no download, no hashing of archives
        return _load_done(done, raw_dir)
    raw_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(raw_dir) + ".lock"):
        if done.is_file():
            return _load_done(done, raw_dir)
        downloads_dir = cache_root / "downloads" / recipe.name
        files = {}
        for item in recipe.downloads:
            url = f"{mirror.rstrip('/')}/{item.filename}" if mirror else item.url
            files[item.filename] = download(url, downloads_dir / item.filename, log=log)
        log(f"extracting {recipe.name} ({src}-{tgt})")
        tmp = Path(tempfile.mkdtemp(dir=raw_dir.parent, prefix=f".tmp-{raw_dir.name}-"))
        try:
            split_files = recipe.extract(files, tmp, src, tgt)
            record = {
                split: {lang: _relative_or_absolute(path, tmp) for lang, path in sides.items()}
                for split, sides in split_files.items()
            }
            (tmp / "complete.json").write_text(json.dumps(record, indent=1))
            if raw_dir.exists():
                shutil.rmtree(raw_dir)
            tmp.rename(raw_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return _load_done(done, raw_dir)


def _relative_or_absolute(path: Path, base: Path) -> str:
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return str(Path(path).resolve())  # e.g. a downloaded .gz read in place


def _load_done(done: Path, raw_dir: Path) -> SplitFiles:
    record = json.loads(done.read_text())
    return {
        split: {lang: raw_dir / rel for lang, rel in sides.items()}  # absolute stays absolute
        for split, sides in record.items()
    }
