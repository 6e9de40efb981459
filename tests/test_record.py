"""The typed record: one class with every field, written only through it, its statuses spelt only
in its module, its fields listed in docs/records.md, and old records still read."""

import ast
import json
import re
from pathlib import Path

import pytest

from posenc.cells import record as record_module
from posenc.cells.layout import RESULT_FILE
from posenc.cells.record import (
    FAILED,
    OK,
    RUNNING,
    SPLIT_FIELDS,
    SPLITS,
    STATUSES,
    Record,
    Split,
    error_of,
    field,
    is_interrupted,
    is_ok,
    status_of,
)

REPO = Path(__file__).resolve().parents[1]
RECORD_MODULE = REPO / "posenc" / "cells" / "record.py"


def package_modules():
    return [p for p in sorted((REPO / "posenc").rglob("*.py")) if p != RECORD_MODULE]


def test_no_module_but_the_records_spells_a_status():
    found = []
    for path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STATUSES:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, "status literals outside posenc/cells/record.py:\n" + "\n".join(found)


def test_only_the_record_writes_result_json():
    """Every writer goes through ``Record.write``: no other module hands RESULT_FILE to a writer."""
    writers = {"write_json_atomic", "write_text_atomic", "write_text", "dump"}
    found = []
    for path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                mentions = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                if name in writers and "RESULT_FILE" in mentions:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found


def documented_fields():
    """The field names of docs/records.md's record table, the long split's row spelt out."""
    text = (REPO / "docs" / "records.md").read_text(encoding="utf-8")
    section = text.split("## The record", 1)[1].split("\n## ", 1)[0]
    names, when_set = [], set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        if "..." in cells[0]:
            names += [field(name, "test_long") for name in SPLIT_FIELDS]
            continue
        (name,) = re.findall(r"`([a-z_]+)`", cells[0])
        names.append(name)
        if "(when set)" in cells[1]:
            when_set.add(name)
    return names, when_set


def test_docs_list_every_field_of_the_record_in_its_order():
    names, when_set = documented_fields()
    assert names == list(Record.names())
    long_split = {field(name, "test_long") for name in SPLIT_FIELDS}
    assert when_set | long_split == set(record_module._ONLY_WHEN_SET)


def test_the_long_split_has_every_field_of_the_test_split():
    assert SPLIT_FIELDS == ("bleu", "bleu_signature", "bleu_options", "tok_bleu", "chrf", "chrf_signature",
                            "chrf_options", "test_sentences", "hypotheses", "generate_wall_s")
    assert all(name in Record.names() for name in SPLIT_FIELDS)


# An issue-11 record, before the family, chrF++, options or stopped_by were recorded, with a field
# of a later version this one does not know.
OLD = {"experiment": "table4", "model": "fconv_small", "data": "synthetic", "pe": "learned", "placement": "both",
       "encoder_pos": "learned", "decoder_pos": "learned", "seed": 1, "status": "ok", "error": "", "bleu": 83.84,
       "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0", "tok_bleu": 83.84,
       "valid_ppl": 1.61, "test_sentences": 500, "num_updates": 218, "train_wall_s": 43.1,
       "hypotheses": "hypotheses.txt", "job_dir": "/c", "config_hash": "5b5f349a752f3bf7",
       "resumed_from_update": 0, "from_the_future": {"x": 1}}


def test_an_old_record_reads_and_writes_back_whole(tmp_path):
    (tmp_path / RESULT_FILE).write_text(json.dumps(OLD))
    record = Record.read(tmp_path)
    assert record.ok and record.bleu == 83.84 and record.family is None and record.chrf is None
    assert record.extra == {"from_the_future": {"x": 1}}
    record.write(tmp_path)
    written = json.loads((tmp_path / RESULT_FILE).read_text())
    assert {k: written[k] for k in OLD} == OLD  # nothing dropped, nothing changed
    assert set(written) - set(OLD) == {"family", "chrf"}  # the defaults of fields it lacked


def test_statuses_change_only_through_finish_and_always_say_why():
    record = Record(placement="both")
    assert not is_ok(record) and record.error  # running, with its reason
    with pytest.raises(ValueError, match="needs an error"):
        record.fail("")
    with pytest.raises(ValueError, match="is not one of"):
        record.finish("done")
    with pytest.raises(AttributeError, match="Record.finish"):
        record.update({"status": OK})
    with pytest.raises(AttributeError, match="'blue'"):
        record.update({"blue": 1.0})
    record.interrupt("interrupted by SIGTERM during fairseq-train")
    assert is_interrupted(record) and is_interrupted(Record.from_dict(record.to_dict()))
    record.succeed()
    assert record.to_dict()["status"] == OK and record.error == ""


# result.json's keys, in order, as written before the splits became one type each (main at 485dd62):
# sweeps written then read the same; ``resume_exact`` came later (issue 48), ``resume_inexact_reason`` and
# ``deterministic`` later still (issue 58).
RESULT_KEYS = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "family",
               "trial", "status", "error", *(field(name, split) for split in SPLITS for name in (
                   "bleu", "bleu_signature", "bleu_options", "tok_bleu", "chrf", "chrf_signature", "chrf_options",
                   "test_sentences", "hypotheses", "generate_wall_s")),
               "valid_ppl", "valid_loss", "num_updates", "epochs", "best_epoch", "stopped_by", "device",
               "gpu_index", "gpu_uuid", "train_wall_s", "resumed_from_update", "resume_exact",
               "resume_inexact_reason", "deterministic", "job_dir", "config_hash", "corpus", "cell_wall_s")


def test_each_split_is_one_type_and_result_json_keeps_its_flat_keys(tmp_path):
    record = Record()
    assert tuple(record.to_dict()) == ("experiment", "model", "data", "pe", "placement", "encoder_pos",
                                       "decoder_pos", "seed", "family", "status", "error", "bleu",
                                       "bleu_signature", "tok_bleu", "chrf", "test_sentences", "hypotheses",
                                       "valid_ppl", "num_updates", "train_wall_s", "resumed_from_update", "job_dir")
    assert (record.test, record.test_long) == (Split(bleu_signature="", hypotheses=""), Split())
    record.update({name: 1 for name in Record.names() if name not in ("status", "error")})
    assert Record.names() == RESULT_KEYS and tuple(record.to_dict()) == RESULT_KEYS
    record.scores("test_long", {"bleu": 3.5})
    assert record.split("test_long") == Split(**{**dict.fromkeys(SPLIT_FIELDS, 1), "bleu": 3.5})
    assert record.split("test_long").bleu == record.bleu_test_long == 3.5 and record.test.bleu == record.bleu == 1
    record.write(tmp_path)
    again = Record.read(tmp_path)
    assert again == record and not again.absent and again.to_dict() == record.to_dict()
    with pytest.raises(ValueError, match="is not one of"):
        record.split("valid")


def test_a_split_score_lands_in_its_own_fields():
    record = Record()
    record.scores("test_long", {"bleu": 3.2, "test_sentences": 500})
    record.scores("test", {"bleu": 20.0})
    assert (record.bleu, record.bleu_test_long, record.test_sentences_test_long) == (20.0, 3.2, 500)
    assert "chrf_test_long" not in record.to_dict() and record.to_dict()["bleu_test_long"] == 3.2


def test_readers_tell_a_field_an_old_or_foreign_file_lacks_from_one_it_has_empty(tmp_path):
    """A record read back has its writers' defaults, but its readers see what the file said: no
    status is no status (not running), and results.csv lists the fields the file has."""
    (tmp_path / RESULT_FILE).write_text(json.dumps({"pe": "learned", "seed": 1, "stopped_by": None, "x": 2}))
    record = Record.read(tmp_path)
    assert record.status == RUNNING and record.absent >= {"status", "error", "family"}  # writers' view
    assert (status_of(record), error_of(record), is_ok(record)) == (None, None, False)
    assert record.as_read() == {"pe": "learned", "seed": 1, "stopped_by": None, "x": 2}
    record.fail("boom")  # set since it was read: absent no more
    assert (status_of(record), error_of(record)) == (FAILED, "boom")
    assert (status_of(None), is_ok(None)) == (None, False)
