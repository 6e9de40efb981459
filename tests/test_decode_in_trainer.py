"""Decoding in the trainer's process (posenc.trainer.fairseq_decode) against stock fairseq-generate.

The harness decodes the test split in the training process once training ends; commands.sh keeps
the stock fairseq-generate command line. Here, for a Transformer cell with beam 5 that also scores
test_long (and in tests/test_harness_e2e.py, for the 4 placements of ``make table4``'s smoke sweep,
through scripts/check_decoding.py), that stock command line is run by hand on
the cell's own checkpoint, and every line fairseq prints per sentence (source, target, hypothesis,
its score, detokenized text and positional scores, to fairseq's 4 decimals) must be byte-identical
to what the trainer wrote. Undertrained models are enough: any difference in loading, seeding,
batching or search changes these lines.
"""

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.cells import layout
from posenc.harness.run.decoding import TrainerDecoding
from posenc.trainer import decode as marks
from posenc.trainer.decode import DECODED_MARK, DECODING_MARK, decoded_split, split_argv, write_plan
from project import BIN, REPO, child_env, posenc_run

SMALL_DATA = ["data.generator.train=400", "data.generator.valid=40", "data.generator.test=60",
              "data.generator.test_long=30"]


def load_check():
    spec = importlib.util.spec_from_file_location("check_decoding", REPO / "scripts" / "check_decoding.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = load_check()
per_sentence_lines = check.per_sentence_lines


def assert_trainer_decoded_like_stock(cell: Path, splits=("test",)) -> int:
    record = json.loads((cell / layout.RESULT_FILE).read_text())
    assert record["status"] == "ok", record["error"]
    assert DECODING_MARK in (cell / layout.TRAIN_LOG).read_text()  # decoded in the trainer, not by the fallback
    for split in splits:
        assert check.compare(cell, split) == "", cell.name
    return len(per_sentence_lines((cell / layout.generate_log(splits[0])).read_text()))


@pytest.mark.slow
def test_a_transformer_cell_with_beam_5_decodes_both_splits_exactly_as_fairseq_generate(tmp_path):
    cell = tmp_path / "cell"
    proc = posenc_run("model=transformer_small", "pe=sinusoidal", "budget=smoke", "generation.beam=5",
                      "generation.test_long=true", *SMALL_DATA, f"hydra.run.dir={cell}",
                      cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--beam 5" in (cell / layout.COMMANDS_FILE).read_text()
    assert_trainer_decoded_like_stock(cell, ("test", "test_long"))


@pytest.mark.slow
def test_a_stop_while_the_trainer_decodes_leaves_no_output_as_whole_and_the_rerun_scores_it(tmp_path):
    cell, cache = tmp_path / "cell", tmp_path / "cache"
    args = ["budget=smoke", "data.generator.train=400", "data.generator.valid=40", "data.generator.test=5000",
            "data.generator.test_long=30", f"hydra.run.dir={cell}"]  # 5,000 test sentences: seconds of decoding
    env = child_env(cache)
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen([str(BIN / "posenc-run"), *args], cwd=tmp_path, env=env, stdout=err, stderr=err,
                                start_new_session=True)
        deadline = time.monotonic() + 600
        log = cell / layout.TRAIN_LOG
        while not (log.exists() and DECODING_MARK in log.read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < deadline, "the trainer never began decoding"
            time.sleep(0.02)
        time.sleep(0.3)  # the checkpoint loaded, search under way
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    record = json.loads((cell / layout.RESULT_FILE).read_text())
    assert record["status"] == "interrupted"
    assert record["error"] == ("interrupted by SIGTERM during fairseq-generate (in the trainer); training is finished: "
                               "a rerun scores it")
    assert f"{DECODED_MARK} test" not in log.read_text()
    assert not (cell / layout.generate_log("test")).exists() and not (cell / layout.HYPOTHESES_FILE).exists()
    rerun = posenc_run(*args, cwd=tmp_path, cache=cache)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "training finished earlier" in rerun.stderr
    record = json.loads((cell / layout.RESULT_FILE).read_text())
    assert record["status"] == "ok" and record["test_sentences"] == 5000
    assert len((cell / layout.HYPOTHESES_FILE).read_text().splitlines()) == 5000
    assert len(per_sentence_lines((cell / layout.generate_log("test")).read_text())) == 5 * 5000


def test_a_run_never_reads_an_earlier_or_partial_log_as_its_own(tmp_path):
    """The plan's run clears earlier logs and partial files; a split counts only once this run's
    trainer said it wrote it whole."""
    log = tmp_path / layout.generate_log("test")
    log.write_text("H-0\t-0.1\tan earlier run's whole output\n")
    (tmp_path / (log.name + ".part")).write_text("H-0\t-0.1\ta killed decoding's half\n")
    generate = [sys.executable, "-m", "fairseq_cli.generate", "DATA", "--beam", "5"]
    decoding = TrainerDecoding(tmp_path, {"test": generate},
                               enabled=True)
    argv = decoding.train_argv(["python", "-m", "posenc.trainer.train", "DATA"])
    assert not log.exists() and not (tmp_path / (log.name + ".part")).exists()
    train_args, plan = split_argv(argv[3:])
    assert train_args == ["DATA"] and json.loads(Path(plan).read_text()) == {
        "test": {"argv": ["DATA", "--beam", "5"], "log": str(log)}}
    assert not decoding.decoded("test")
    decoding.on_line(f"{DECODED_MARK} test 1.234\n")
    assert not decoding.decoded("test")  # said so, but the log is not there
    log.write_text("H-0\t-0.1\tthis run's\n")
    assert decoding.decoded("test") and decoding.seconds["test"] == 1.2


def test_without_a_plan_the_trainer_gets_fairseqs_own_arguments(tmp_path):
    decoding = TrainerDecoding(tmp_path, {"test": ["python", "-m", "fairseq_cli.generate", "DATA"]}, enabled=False)
    assert decoding.train_argv(["python", "-m", "posenc.trainer.train", "DATA"]) == \
        ["python", "-m", "posenc.trainer.train", "DATA"]
    assert split_argv(["DATA", "--seed", "1"]) == (["DATA", "--seed", "1"], None)
    assert decoded_split("posenc: decoded test_long 0.5") == ("test_long", 0.5)
    assert decoded_split("posenc: decoded") is None
    assert decoding.step_limit(600, 300) == 600  # nothing to decode: the training's own limit


def test_the_training_steps_limit_makes_room_for_each_split_it_decodes(tmp_path):
    generate = ["python", "-m", "fairseq_cli.generate", "DATA"]
    decoding = TrainerDecoding(tmp_path, {"test": generate, "test_long": generate}, enabled=True)
    assert decoding.step_limit(600, 300) == 1200
    assert decoding.step_limit(0, 0) == 0  # no limits stay no limits


def test_a_decoding_that_fails_in_the_trainer_says_so_in_one_line_and_leaves_nothing_half_written(tmp_path):
    """The trainer's process goes on to exit 0 (training is finished); the harness decodes instead."""
    log = tmp_path / layout.generate_log("test")
    write_plan(tmp_path / "plan.json", {"test": ([sys.executable, "-m", "fairseq_cli.generate", str(tmp_path / "none"),
                                                  "--task", "translation", "--path", str(tmp_path / "none.pt")], log)})
    code = "import sys; from posenc.trainer.fairseq_decode import decode; decode(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plan.json")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stdout.splitlines() if line.startswith("posenc: ")]
    assert said[0] == DECODING_MARK and len(said) == 2 and said[1].startswith(marks.FAILED_MARK + " ")
    assert not log.exists() and not (tmp_path / (log.name + ".part")).exists()
