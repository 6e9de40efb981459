"""kinds_module=: a position kind from the user's own file, swept by posenc-run, trained and decoded
by fairseq's children, read by posenc-pe; a file that cannot be used is refused in one line."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from posenc.harness.config.environment import ALWAYS
from project import BIN, cell_of, compose_cfg, posenc_run

# The user's file the docs show (examples/my_kinds.py): a learned table added at half strength,
# registered as "halftable", importing posenc.kinds and torch only.
HALFTABLE = (Path(__file__).resolve().parents[1] / "examples" / "my_kinds.py").read_text()
SMALL_DATA = ["data.generator.train=300", "data.generator.valid=40", "data.generator.test=37",
              "data.generator.test_long=0"]


@pytest.mark.parametrize("case,content,expected", [
    ("missing", None, "file not found"),
    ("nothing", "X = 1\n", "registers no position kind; allowed: a Python file that registers position kinds"),
    ("clash", "from posenc.kinds import EMBEDDINGS, register_kind\n"
              "register_kind('sinusoidal', families='fconv', acts=EMBEDDINGS, build='m:f')\n",
     "position kind 'sinusoidal' is already registered"),
    ("broken", "x = 1\nraise RuntimeError('boom')\n", "RuntimeError at line 2: boom"),
    ("fairseq", "import fairseq  # noqa\n" + HALFTABLE,
     "imports fairseq; a kinds file needs posenc.kinds and torch only"),
])
def test_a_file_that_cannot_be_used_gets_one_line_and_nothing_runs(tmp_path, case, content, expected):
    kinds = tmp_path / "my_kinds.py"
    if content is not None:
        kinds.write_text(content)
    proc = posenc_run("kinds_module=my_kinds.py", "pe=halftable", "budget=smoke", *SMALL_DATA,
                      f"hydra.run.dir={tmp_path / 'cell'}", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posenc-run: error: kinds_module=my_kinds.py"), proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists() and not (tmp_path / "cell" / "result.json").exists()


@pytest.mark.usefixtures("without_fairseq_config_store")
def test_the_hashes_take_the_files_content_not_its_path(tmp_path):
    from omegaconf import open_dict

    from posenc.harness.hashing import config_hash, training_hash

    (tmp_path / "a").mkdir()
    first, moved = tmp_path / "my_kinds.py", tmp_path / "a" / "my_kinds.py"
    first.write_text(HALFTABLE)
    shutil.copy(first, moved)
    base = compose_cfg(hydra=False)
    cfg = compose_cfg(f"kinds_module={first}", hydra=False)
    assert config_hash(compose_cfg(f"kinds_module={moved}", hydra=False)) == config_hash(cfg)  # moved: same cell
    assert config_hash(cfg) != config_hash(base) and training_hash(cfg) != training_hash(base)
    moved.write_text(HALFTABLE.replace("0.5 *", "0.25 *"))
    assert training_hash(compose_cfg(f"kinds_module={moved}", hydra=False)) != training_hash(cfg)  # edited: rerun
    before = base.copy()  # as composed before the key existed: null leaves every hash as it was
    with open_dict(before):
        del before["kinds_module"]
    assert base.kinds_module is None and config_hash(before) == config_hash(base)


@pytest.mark.slow
def test_a_users_kind_is_swept_on_joblib_decoded_again_and_read_by_posenc_pe(tmp_path):
    (tmp_path / "my_kinds.py").write_text(HALFTABLE)
    sweep = tmp_path / "sweep"
    proc = posenc_run("-m", "kinds_module=my_kinds.py", "model=transformer_small", "pe=sinusoidal,halftable",
                      "budget=smoke", *SMALL_DATA, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                      f"hydra.sweep.dir={sweep}", cwd=tmp_path, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = {json.loads(p.read_text())["pe"]: json.loads(p.read_text()) for p in sweep.glob("*/result.json")}
    assert set(records) == {"sinusoidal", "halftable"}
    mine = records["halftable"]
    assert mine["status"] == "ok", mine["error"]
    assert (mine["encoder_pos"], mine["decoder_pos"]) == ("halftable", "halftable")
    assert "| halftable |" in (sweep / "table.md").read_text()
    job = Path(mine["job_dir"])
    commands = (job / "commands.sh").read_text()
    assert f"export POSENC_KINDS_MODULE={tmp_path / 'my_kinds.py'}" in commands
    assert "--encoder-pos halftable" in commands

    # the checkpoint decodes again with stock fairseq-generate and the plugin, given the same file
    checkpoint = job / "checkpoints" / "checkpoint_best.pt"
    bin_dir = Path(mine["corpus"]["dir"]) / "bin"
    plugin = Path(__file__).resolve().parents[1] / "posenc" / "fairseq_plugin"
    generate = [str(BIN / "fairseq-generate"), str(bin_dir), "--user-dir", str(plugin), "--path", str(checkpoint),
                "--gen-subset", "test", "--beam", "2", "--max-len-b", "5", "--cpu",
                "--required-batch-size-multiple", "1"]  # fairseq #5036, as the harness
    env = {**os.environ, **ALWAYS, "POSENC_KINDS_MODULE": str(tmp_path / "my_kinds.py")}  # as commands.sh
    again = subprocess.run(generate, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert sum(line.startswith("H-") for line in again.stdout.splitlines()) == 37
    without = subprocess.run(generate, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                             env={k: v for k, v in env.items() if k != "POSENC_KINDS_MODULE"})
    assert without.returncode != 0 and "halftable" in without.stderr  # the kind is the file's, not the plugin's

    # posenc-pe reads the user's table through its registration
    out = tmp_path / "pe"
    pe = subprocess.run([str(BIN / "posenc-pe"), "checkpoint", str(checkpoint), "--out", str(out), "--no-probes",
                         "--kinds-module", str(tmp_path / "my_kinds.py")], capture_output=True, text=True,
                        timeout=600)
    assert pe.returncode == 0, pe.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert "halftable" in json.dumps(report)


@pytest.mark.usefixtures("without_fairseq_config_store")
@pytest.mark.parametrize("skip_impossible", [False, True])
def test_a_cell_reads_and_hashes_its_kinds_file_once(tmp_path, monkeypatch, skip_impossible):
    """Resolving a cell loads the user's file once (one read, one digest), and its hashes take that
    digest: the same hashes as hashing the file afresh."""
    from docs_check_hydra import registry_kept
    from posenc.harness.config.resolve import resolve_cell
    from posenc.harness.hashing import cell_hashes

    kinds = tmp_path / "my_kinds.py"
    kinds.write_text(HALFTABLE)
    reads, read_bytes = [], Path.read_bytes

    def counted(path):
        if Path(path).resolve() == kinds.resolve():
            reads.append(path)
        return read_bytes(path)

    cfg = compose_cfg("paths.cache_dir=/no/cache", f"kinds_module={kinds}", "pe=halftable",
                      f"skip_impossible={skip_impossible}", hydra=False)
    with registry_kept():
        monkeypatch.setattr(Path, "read_bytes", counted)
        cell = cell_of(resolve_cell(cfg))
        assert len(reads) == 1, reads
        monkeypatch.undo()
        assert cell.hashes == cell_hashes(cfg)   # cfg alone: the file read and hashed again here
