"""Downloads and recipes against local files and a loopback server only (never the network)."""

import gzip
import hashlib
import http.server
import io
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from posenc.corpora import CorpusError, prepare_corpus
from posenc.corpora.download import download
from posenc.corpora.recipes import _extract_iwslt14

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB, more than one read block


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        server = self.server
        server.requests.append(self.headers.get("Range"))
        data = server.payload
        start = 0
        if self.headers.get("Range") and server.honour_range:
            start = int(self.headers["Range"].split("=")[1].rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.cut_after is not None:
            # announce the whole body, send part of it, hang up: an interrupted download
            self.wfile.write(body[: server.cut_after])
            server.cut_after = None
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.payload, httpd.requests, httpd.honour_range, httpd.cut_after = PAYLOAD, [], True, None
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}/file.bin"
    httpd.shutdown()
    httpd.server_close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_download_with_checksum(server, tmp_path):
    httpd, url = server
    dest = download(url, tmp_path / "f.bin", sha256=sha(PAYLOAD), log=lambda _: None)
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "f.bin.part").exists()
    download(url, dest, sha256=sha(PAYLOAD), log=lambda _: None)  # present: no request
    assert httpd.requests == [None]


def test_interrupted_download_resumes_with_a_range_request(server, tmp_path):
    httpd, url = server
    httpd.cut_after = 300_000
    dest = tmp_path / "f.bin"
    with pytest.raises(CorpusError, match="run again to resume") as info:
        download(url, dest, sha256=sha(PAYLOAD), log=lambda _: None)
    assert "\n" not in str(info.value)
    part = tmp_path / "f.bin.part"
    assert part.stat().st_size == 300_000 and not dest.exists()
    logs = []
    download(url, dest, sha256=sha(PAYLOAD), log=logs.append)
    assert httpd.requests == [None, "bytes=300000-"]
    assert dest.read_bytes() == PAYLOAD
    assert any("resuming" in line and "300000" in line for line in logs)


def test_server_ignoring_range_restarts_cleanly(server, tmp_path):
    httpd, url = server
    httpd.honour_range = False
    (tmp_path / "f.bin.part").write_bytes(PAYLOAD[:1000])
    download(url, tmp_path / "f.bin", sha256=sha(PAYLOAD), log=lambda _: None)
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD  # not 1000 bytes too many


def test_checksum_mismatch_removes_the_download(server, tmp_path):
    _, url = server
    wrong = "0" * 64
    with pytest.raises(CorpusError) as info:
        download(url, tmp_path / "f.bin", sha256=wrong, log=lambda _: None)
    message = str(info.value)
    assert "checksum mismatch" in message and wrong in message and sha(PAYLOAD) in message
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_file_url_and_resume(tmp_path):
    source = tmp_path / "src.bin"
    source.write_bytes(PAYLOAD)
    (tmp_path / "out.bin.part").write_bytes(PAYLOAD[:5000])
    dest = download(source.as_uri(), tmp_path / "out.bin", sha256=sha(PAYLOAD),
                    log=lambda _: None)
    assert dest.read_bytes() == PAYLOAD


def test_offline_is_one_clear_line(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/de-en.tgz"
    with pytest.raises(CorpusError) as info:
        download(url, tmp_path / "de-en.tgz", log=lambda _: None)
    message = str(info.value)
    assert message.startswith(f"cannot download {url}") and "offline?" in message
    assert "\n" not in message


def _tar(path: Path, members: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_iwslt14_extraction_follows_fairseq(tmp_path):
    train_de = ["<url>http://x</url>", "<talkid>1</talkid>", "<title>Titel eins</title>"]
    train_en = ["<url>http://x</url>", "<talkid>1</talkid>", "<title>Title one</title>"]
    train_de += [f"  Satz {i}  " for i in range(46)]
    train_en += [f"Sentence {i}" for i in range(46)]
    members = {"de-en/train.tags.de-en.de": "\n".join(train_de) + "\n",
               "de-en/train.tags.de-en.en": "\n".join(train_en) + "\n"}
    for name in ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010",
                 "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012"):
        for lang in ("de", "en"):
            members[f"de-en/{name}.de-en.{lang}.xml"] = (
                f'<doc docid="1">\n<seg id="1"> {name} {lang} one </seg>\n'
                f'<seg id="2">{name} {lang} two</seg>\n</doc>\n')
    archive = _tar(tmp_path / "de-en.tgz", members)
    files = _extract_iwslt14({"de-en.tgz": archive}, tmp_path / "out", "de", "en")
    read = {s: {lang: p.read_text().splitlines() for lang, p in v.items()} for s, v in files.items()}
    # 47 lines after dropping tags; every 23rd goes to valid (lines 23 and 46)
    assert read["valid"]["de"] == ["Satz 21", "Satz 44"]
    assert read["valid"]["en"] == ["Sentence 21", "Sentence 44"]
    assert read["train"]["de"][0] == "Titel eins" and len(read["train"]["en"]) == 45
    assert len(read["test"]["de"]) == 10 and read["test"]["en"][0] == "IWSLT14.TED.dev2010 en one"


@pytest.mark.slow
def test_multi30k_recipe_through_a_local_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for stem, n in (("train", 200), ("val", 20), ("test_2016_flickr", 20)):
        for lang, words in (("de", "Ein Hund läuft im Park Nummer"),
                            ("en", "A dog runs in the park number")):
            text = "".join(f"{words} {stem} {i}.\n" for i in range(n))
            (mirror / f"{stem}.{lang}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    cfg = {"name": "multi30k_de_en", "recipe": "multi30k", "src": "de", "tgt": "en",
           "mirror": mirror.as_uri(), "subword_size": 100, "workers": 1}
    logs = []
    prepared = prepare_corpus(cfg, tmp_path / "cache", log=logs.append)
    assert prepared.sizes == {"train": 200, "valid": 20, "test": 20}
    assert prepared.test_refs["test"].read_text().splitlines()[3] == \
        "A dog runs in the park number test_2016_flickr 3."
    assert (tmp_path / "cache" / "downloads" / "multi30k" / "train.de.gz").is_file()
    assert sum("downloading" in line for line in logs) == 6
    logs.clear()
    assert prepare_corpus(cfg, tmp_path / "cache", log=logs.append) == prepared
    assert not any("downloading" in line for line in logs)
    with pytest.raises(CorpusError, match="recipe multi30k covers the languages de and en"):
        prepare_corpus({**cfg, "tgt": "fr"}, tmp_path / "cache")
