"""A cell interrupted and resumed ends exactly as an uninterrupted one: the same parameters and
optimizer state, bit for bit, the same updates, and the same hypotheses, byte for byte
(``posenc.trainer.exact_resume``), on every optimizer preset the project ships (``conf/optim/``).

Each preset trains once without a stop, and once stopped five times, each time through the cells'
own trainer (``posenc.trainer.train``, run by ``tests/resume_driver.py``, which sends the trainer a
real signal after a chosen update and forks every run from one process that imported torch and
fairseq once): SIGTERM (its save-and-stop) and SIGKILL, each leaving the checkpoint to resume from
at an epoch's end and inside an epoch (a checkpoint every 2 updates, epochs of 3 updates), and a
SIGKILL after the training's last save, before fairseq's "done training". Each stop is followed by a
rerun of the same command, as the harness reruns a cell; the last run and the uninterrupted one
decode the test split in the trainer (``posenc.trainer.fairseq_decode``)."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from posenc.confdir import CONF_DIR
from posenc.harness.config.commands import flags
from posenc.harness.fairseq_logs import hypotheses_by_id, stopped_by
from posenc.trainer.decode import DECODE_FLAG, write_plan
from posenc.trainer.stop import EXACT_RESUME_MARK, FINISHED_MARK, INEXACT_RESUME_MARK, STOPPED_EXIT

DRIVER = Path(__file__).resolve().parent / "resume_driver.py"
PLUGIN = Path(__file__).resolve().parents[1] / "posenc" / "fairseq_plugin"
EPOCH = 3         # updates per epoch on the corpus below (checked)
SAVE_EVERY = 2    # --save-interval-updates: checkpoints inside epochs too, as budget=paper has
UPDATES = 16      # a preset without an end of its own stops here; convs2s ends itself (stop_min_lr) before
PRESETS = sorted(p.stem for p in (CONF_DIR / "optim").glob("*.yaml"))
# Each preset on a model of the family it is for (conf/model/), and what the case adds:
# convs2s: a plateau that decides within a few epochs (a 50% better loss or a bad epoch; shrink after
#          two bad epochs, so num_bad_epochs carries across resumes; x0.01: stop_min_lr after two);
# fconv_adam: fp16's dynamic loss scaler (memory-efficient fp16 runs on a CPU; it grows every 3 updates);
# transformer_adam: dropout and attention dropout; vaswani: the shape kind (a generator of its own);
# fairseq_fconv_wmt_en_de: its anneal from epoch 2, x0.01 an epoch (the recipe's x0.1 from epoch 50),
#          so that epoch 4 is the first below the recipe's lr floor and the last trained: the stop
#          inside epoch 4 resumes with an lr below the floor, which fairseq's loop checks before an epoch.
CASES = {
    "convs2s": ["--arch", "posenc_fconv_small", "--lr-threshold", "0.5", "--lr-patience", "1", "--lr-shrink", "0.01"],
    "fconv_adam": ["--arch", "posenc_fconv_small", "--dropout", "0.2", "--memory-efficient-fp16",
                   "--fp16-init-scale", "4", "--fp16-scale-window", "3"],
    "transformer_adam": ["--arch", "posenc_transformer_small", "--dropout", "0.3", "--attention-dropout", "0.1"],
    "vaswani": ["--arch", "posenc_transformer_small", "--encoder-pos", "shape", "--decoder-pos", "shape"],
    # fairseq's own recipes (issue 59): the plateau schedule (fconv) and inverse_sqrt (transformer)
    "fairseq_fconv_iwslt_de_en": ["--arch", "posenc_fconv_small", "--lr-threshold", "0.5", "--lr-patience", "1"],
    "fairseq_fconv_wmt_en_de": ["--arch", "posenc_fconv_small", "--force-anneal", "2", "--lr-shrink", "0.01"],
    "fairseq_transformer_iwslt_de_en": ["--arch", "posenc_transformer_small"],
}
# One run stopped again and again, each stop followed by a rerun: (signal, after update). SIGTERM
# saves that update; SIGKILL comes before that update's own save, so what survives is the
# checkpoint before it; KILL_SAVED after the last update's save ("last": where training ends).
STOPS = [("TERM", 6),              # saves 6: epoch 2's end (after its validation, before its lr step)
         ("TERM", 8),              # saves 8: inside epoch 3
         ("KILL", 10),             # leaves 9: epoch 3's end
         ("KILL", 11),             # leaves 10 (--save-interval-updates): inside epoch 4
         ("KILL_SAVED", "end")]    # leaves the last: training had ended, the rerun trains no further
RESUMED_AT = [6, 8, 9, 10, "end"]
# Where training ends: the preset's cap, or for convs2s its schedule (the plateau's two shrinks take it
# below stop_min_lr after epoch 5; checked against the uninterrupted run).
END = {"convs2s": 15, "fairseq_fconv_wmt_en_de": 12}


def preset_args(name: str):
    """The preset's fairseq flags as the harness passes them, the case's, the length (the preset's
    own where shorter than ours), and where training ends."""
    preset = OmegaConf.load(CONF_DIR / "optim" / f"{name}.yaml")
    length = preset.max_update if 0 < preset.max_update < UPDATES else UPDATES
    args = [*flags(OmegaConf.to_container(preset.args, resolve=True)), *CASES[name], "--max-update", str(length)]
    return args, END.get(name, length)


def argv(corpus, save_dir, args, plan=None) -> list:
    out = [str(corpus), "--user-dir", str(PLUGIN), "--task", "translation", *args, "--max-tokens", "500",
           "--save-interval-updates", str(SAVE_EVERY), "--keep-interval-updates", "1", "--seed", "1",
           "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--required-batch-size-multiple", "1",
           "--log-format", "json", "--log-interval", "1", "--num-workers", "0", "--cpu", "--no-progress-bar"]
    return out + ([DECODE_FLAG, str(plan)] if plan else [])


def decode_plan(corpus, save_dir: Path) -> Path:
    """The test split decoded in the trainer once training ends, into ``<save_dir>-test.log``."""
    generate = [sys.executable, "-m", "fairseq_cli.generate", str(corpus), "--user-dir", str(PLUGIN),
                "--path", str(save_dir / "checkpoint_best.pt"), "--gen-subset", "test", "--beam", "4",
                "--batch-size", "8", "--cpu", "--num-workers", "0"]
    plan = save_dir.parent / f"{save_dir.name}-plan.json"
    write_plan(plan, {"test": (generate, save_dir.parent / f"{save_dir.name}-test.log")})
    return plan


def drive(tmp_path: Path, runs: list) -> list:
    """The trainer runs ``(argv, stop_at, signal, log)``, one after another; their exit statuses."""
    plan, result = tmp_path / "runs.json", tmp_path / "codes.json"
    plan.write_text(json.dumps({"runs": [{"argv": a, "stop_at": at, "signal": sig, "log": str(log)}
                                         for a, at, sig, log in runs], "result": str(result)}))
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(DRIVER), str(plan)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(result.read_text())


def expected_status(signame: str) -> int:
    return STOPPED_EXIT if signame == "TERM" else -signal.SIGKILL


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


def updates_of(save_dir: Path) -> int:
    return load(save_dir / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"]


def hypotheses(log: Path) -> dict:
    found = hypotheses_by_id(log.read_text().splitlines())
    assert found
    return found


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_a_resumed_cell_equals_an_uninterrupted_one_on_every_preset(reversal_corpus, tmp_path, preset):
    assert preset in CASES, f"conf/optim/{preset}.yaml is shipped: give it a case here"
    args, end = preset_args(preset)
    reference, resumed = tmp_path / "uninterrupted", tmp_path / "resumed"
    stops = [("", 0)] + [(sig, end if at == "end" else at) for sig, at in STOPS] + [("", 0)]
    runs = [(argv(reversal_corpus, folder, args, decode_plan(reversal_corpus, folder) if not sig else None), at, sig,
             tmp_path / f"run{i}.log") for i, ((sig, at), folder) in
            enumerate(zip(stops, [reference] + [resumed] * (len(stops) - 1)))]
    assert drive(tmp_path, runs) == [0] + [expected_status(sig) for sig, _ in STOPS] + [0]
    log, resumed_logs = runs[0][-1].read_text(), "".join(log.read_text() for *_, log in runs[1:])
    assert f'"train_num_updates": "{EPOCH}"' in log and updates_of(reference) == end  # epochs and end as assumed
    assert INEXACT_RESUME_MARK not in resumed_logs
    assert re.findall(re.escape(EXACT_RESUME_MARK) + r" (\d+)", resumed_logs) == [
        str(end if at == "end" else at) for at in RESUMED_AT]
    assert_same_training(resumed, reference)
    assert hypotheses(tmp_path / "resumed-test.log") == hypotheses(tmp_path / "uninterrupted-test.log")
    # The run resumed after the last save trained no further and ended as the uninterrupted one did.
    final = runs[-1][-1].read_text()
    assert '"train_inner"' not in final and stopped_by(resumed_logs.splitlines()) == stopped_by(log.splitlines())
    if preset == "convs2s":  # the plateau shrank the lr twice and ended the schedule at stop_min_lr
        assert stopped_by(log.splitlines()) == "stop_min_lr"
        assert re.findall(r'"train_lr": "([^"]+)"', log)[-1] == "0.0025"
    elif preset == "fairseq_fconv_wmt_en_de":  # epoch 4 trained below the floor, then the floor ended it
        assert stopped_by(log.splitlines()) == "stop_min_lr"
        assert float(re.findall(r'"train_lr": "([^"]+)"', log)[-1]) == pytest.approx(0.5 * 0.01 ** 3)  # < 1e-5
    else:
        assert f"{FINISHED_MARK} max_update" in final
    if preset == "fconv_adam":  # fp16's loss scale grew as it did uninterrupted
        scales = [load(d / "checkpoint_last.pt")["last_optimizer_state"]["loss_scale"] for d in (resumed, reference)]
        assert scales[0] == scales[1] > 4


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
    restore = inspect.getsource(exact_resume._STOCK.get("restore", checkpoint_utils.load_checkpoint))
    assert 'trainer.get_train_iterator(\n            epoch=itr_state["epoch"]' in restore
    assert "epoch_itr.load_state_dict(itr_state)" in restore
    # What posenc.trainer.loop_state relies on: the loop saves an epoch's last checkpoint (with its
    # val_loss) before the epoch's lr step, a restore steps without a loss, and the state it carries.
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule
    from fairseq_cli import train

    loop = inspect.getsource(train.main)
    assert loop.index("train(cfg, trainer, task, epoch_itr)") < loop.index(
        "lr = trainer.lr_step(epoch_itr.epoch, valid_losses[0])")
    assert '"val_loss": val_loss' in inspect.getsource(checkpoint_utils.save_checkpoint)
    # What loop_state.check_as_uninterrupted relies on: a restore ends with an lr step, the loop then reads
    # the lr it checks against --stop-min-lr from the trainer, before the epoch's train() begins it.
    assert restore.rstrip().endswith("trainer.lr_step(epoch_itr.epoch)\n\n    return extra_state, epoch_itr")
    assert loop.index("checkpoint_utils.load_checkpoint(") < loop.index("lr = trainer.get_lr()") < loop.index(
        "if lr <= cfg.optimization.stop_min_lr:") < loop.index("train(cfg, trainer, task, epoch_itr)")
    assert "self.lr_step_begin_epoch(epoch)" in inspect.getsource(Trainer.begin_epoch)
    assert "self.lr_step(epoch)" in inspect.getsource(stock("load_checkpoint"))
    assert "self.lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(" in inspect.getsource(
        ReduceLROnPlateauLRSchedule)
    early = inspect.getsource(train.should_stop_early)
    assert "should_stop_early.best = valid_loss" in early and "should_stop_early.num_runs += 1" in early
