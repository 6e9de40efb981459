"""A cell interrupted and resumed ends exactly as an uninterrupted one: the same parameters and
optimizer state, bit for bit, and the same hypotheses, byte for byte (``posenc.trainer.exact_resume``).

Each model trains once without a stop, and once stopped six times, each time through the cells'
own trainer (``python -m posenc.trainer.train``, driven by ``tests/resume_driver.py``, which sends
the trainer a real signal after a chosen update): SIGTERM (its save-and-stop) and SIGKILL, each
leaving the checkpoint to resume from inside epoch 1, at the end of epoch 1 and inside epoch 2 (a
checkpoint every 2 updates, epochs of 3 updates). Each stop is followed by a rerun of the same
command, as the harness reruns a cell."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fairseq_tools import fairseq
from posenc.harness.fairseq_logs import hypotheses_by_id
from posenc.trainer.stop import EXACT_RESUME_MARK, STOPPED_EXIT

DRIVER = Path(__file__).resolve().parent / "resume_driver.py"
PLUGIN = Path(__file__).resolve().parents[1] / "posenc" / "fairseq_plugin"
EPOCH = 3         # updates per epoch on the corpus below (checked)
SAVE_EVERY = 2    # --save-interval-updates: checkpoints inside epochs too, as budget=paper has
UPDATES = 6       # two epochs
MODELS = {
    "convs2s": ["--arch", "posenc_fconv_small", "--dropout", "0.2"],
    "transformer-dropout": ["--arch", "posenc_transformer_small", "--dropout", "0.3", "--attention-dropout", "0.1"],
    "shape": ["--arch", "posenc_transformer_small", "--encoder-pos", "shape", "--decoder-pos", "shape",
              "--dropout", "0.1"],
}
# One run stopped again and again, each stop followed by a rerun, each kind of stop at each place:
# (signal, after update): SIGTERM saves that update; SIGKILL comes before that update's own save,
# so what survives is the checkpoint before it.
STOPS = [("TERM", 2),  # saves 2: inside epoch 1
         ("KILL", 3),  # leaves 2 (the save-and-stop's): inside epoch 1
         ("TERM", 3),  # saves 3: the end of epoch 1 (after its validation)
         ("KILL", 4),  # leaves 3: the end of epoch 1
         ("KILL", 5),  # leaves 4 (--save-interval-updates): inside epoch 2
         ("TERM", 5)]  # saves 5: inside epoch 2
RESUMED_AT = [2, 2, 3, 3, 4, 5]


def trainer(corpus, save_dir, model, stop_at=0, signame="TERM"):
    argv = [str(corpus), "--user-dir", str(PLUGIN), "--task", "translation", *MODELS[model],
            "--optimizer", "adam", "--lr", "0.002", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", "500", "--max-update", str(UPDATES),
            "--save-interval-updates", str(SAVE_EVERY), "--keep-interval-updates", "1", "--seed", "1",
            "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--required-batch-size-multiple", "1",
            "--log-format", "json", "--log-interval", "1", "--num-workers", "0", "--cpu", "--no-progress-bar"]
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, str(DRIVER), str(stop_at), signame, *argv], env=env,
                          capture_output=True, text=True, timeout=600)


def train_with_stops(corpus, save_dir, model, stops) -> str:
    """Train to the end, stopped as ``stops`` say and rerun after each; the logs of all runs."""
    logs = ""
    for signame, stop_at in [*stops, ("TERM", 0)]:
        run = trainer(corpus, save_dir, model, stop_at, signame)
        logs += run.stdout
        expected = 0 if not stop_at else STOPPED_EXIT if signame == "TERM" else -signal.SIGKILL
        assert run.returncode == expected, run.stderr[-3000:]
    return logs


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def tensors(state, prefix=""):
    """Every tensor in a nested checkpoint structure, by its path."""
    if torch.is_tensor(state):
        return {prefix: state}
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else []
    return {path: t for key, value in items for path, t in tensors(value, f"{prefix}/{key}").items()}


def assert_same_training(resumed: Path, reference: Path):
    """Model parameters, optimizer state and update count equal bit for bit (the files also hold
    wall-clock times, so the files themselves differ)."""
    for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
        mine, theirs = load(resumed / name), load(reference / name)
        for part in ("model", "last_optimizer_state"):
            a, b = tensors(mine[part]), tensors(theirs[part])
            assert a.keys() == b.keys() and a
            differing = [k for k in a if not torch.equal(a[k], b[k])]
            assert not differing, f"{name} {part}: {differing[:5]}"
        assert mine["optimizer_history"][-1]["num_updates"] == theirs["optimizer_history"][-1]["num_updates"]
        assert mine["extra_state"]["train_iterator"] == theirs["extra_state"]["train_iterator"]


def hypotheses(corpus, save_dir: Path, cwd):
    out = fairseq("fairseq-generate", corpus, "--user-dir", PLUGIN, "--path", save_dir / "checkpoint_best.pt",
                  "--gen-subset", "test", "--beam", "4", "--batch-size", "8", "--cpu", "--num-workers", "0", cwd=cwd)
    found = hypotheses_by_id(out.stdout.splitlines())
    assert found
    return found


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_a_resumed_cell_equals_an_uninterrupted_one(reversal_corpus, tmp_path, model):
    reference = tmp_path / "uninterrupted"
    log = train_with_stops(reversal_corpus, reference, model, [])
    assert f'"train_num_updates": "{EPOCH}"' in log  # epoch 1 is as long as assumed
    resumed = tmp_path / "resumed"
    logs = train_with_stops(reversal_corpus, resumed, model, STOPS)
    assert re.findall(re.escape(EXACT_RESUME_MARK) + r" (\d+)", logs) == [str(u) for u in RESUMED_AT]
    assert_same_training(resumed, reference)
    assert hypotheses(reversal_corpus, resumed, tmp_path) == hypotheses(reversal_corpus, reference, tmp_path)


def test_the_fairseq_code_exact_resume_wraps_is_where_and_as_it_was():
    """``posenc.trainer.exact_resume`` wraps three methods of fairseq-fixed 0.12.3.1's Trainer and relies on
    how fairseq builds and restores the training iterator: fail loudly here if a new fairseq moves them."""
    import inspect

    from fairseq import checkpoint_utils
    from fairseq.tasks.fairseq_task import FairseqTask
    from fairseq.trainer import Trainer

    from posenc.trainer import exact_resume

    def stock(name):
        return exact_resume._STOCK.get(name, getattr(Trainer, name))

    assert list(inspect.signature(stock("get_train_iterator")).parameters) == [
        "self", "epoch", "combine", "load_dataset", "data_selector", "shard_batch_itr", "disable_iterator_cache"]
    assert list(inspect.signature(stock("state_dict")).parameters) == ["self"]
    assert list(inspect.signature(stock("load_checkpoint")).parameters)[:2] == ["self", "filename"]
    assert '"extra_state": {' in inspect.getsource(stock("state_dict"))
    assert "return extra_state" in inspect.getsource(stock("load_checkpoint"))
    # The batches depend on the epoch the iterator is built for; a restore builds it for the saved epoch.
    assert "numpy_seed(seed + epoch)" in inspect.getsource(FairseqTask.get_batch_iterator)
    restore = inspect.getsource(checkpoint_utils.load_checkpoint)
    assert 'trainer.get_train_iterator(\n            epoch=itr_state["epoch"]' in restore
    assert "epoch_itr.load_state_dict(itr_state)" in restore
