"""Whether a resume is exact, and whether the checkpoint it resumes from ended the training.

A resume is exact when the checkpoint holds everything the cell draws from (this version's resume
state, ``RESUME_VERSION``) and the resumed process trains as the one that saved it did:

- a schedule whose state posenc restores and whose resume the tests check (``EXACT_SCHEDULES``);
- fp16's dynamic loss scaler (restored), not ``--amp``'s GradScaler (fairseq saves none of it);
- the same number of training processes (another world size splits the batches otherwise);
- the same device, and on CUDA as many devices (their generators' states are restored only then);
- on CUDA, ``runtime.deterministic=true`` before and after (``posenc.trainer.deterministic``):
  without it the GPU's kernels do not repeat their bits, resumed or not.

``inexact_reasons`` says what breaks it, in words the record keeps (``resume_inexact_reason``).
"""

import torch
from fairseq.optim.amp_optimizer import AMPOptimizer

from posenc.trainer import deterministic
from posenc.trainer.loop_state import early_stopping
from posenc.trainer.stop import RESUME_VERSION

# fairseq's fixed (constant, or annealed by epoch), inverse_sqrt and reduce_lr_on_plateau: those of
# conf/optim/, each resumed from an epoch's end and inside one by tests/test_exact_resume.py.
EXACT_SCHEDULES = ("fixed", "inverse_sqrt", "reduce_lr_on_plateau")


def process_state(trainer) -> dict:
    """How this process trains, saved beside the random states to compare a resume with."""
    return {"world_size": trainer.data_parallel_world_size, "device": trainer.device.type,
            "deterministic": deterministic.enabled()}


def inexact_reasons(trainer, saved) -> list:
    """Why resuming from a checkpoint whose resume state is ``saved`` (None: it has none) is not exact."""
    if saved is None:
        return ["its checkpoint lacks the random states: written by an older version"]
    if saved.get("version") != RESUME_VERSION:
        return [f"its checkpoint holds resume state version {saved.get('version')}, this trainer restores "
                f"version {RESUME_VERSION} (written by another version)"]
    return [*_training_reasons(trainer), *_process_reasons(saved, process_state(trainer))]


def _training_reasons(trainer) -> list:
    reasons = []
    schedule = trainer.cfg.lr_scheduler._name
    if schedule not in EXACT_SCHEDULES:
        reasons.append(f"lr_scheduler {schedule} is not one whose resume posenc restores and checks "
                       f"({', '.join(EXACT_SCHEDULES)})")
    if isinstance(trainer.optimizer, AMPOptimizer):
        reasons.append("--amp's loss scaler (torch's GradScaler) is not saved in fairseq's checkpoint")
    return reasons


def _process_reasons(saved: dict, now: dict) -> list:
    reasons = []
    if saved["world_size"] != now["world_size"]:
        reasons.append(f"saved by {saved['world_size']} training processes, resumed by {now['world_size']}")
    if saved["device"] != now["device"]:
        reasons.append(f"saved on {saved['device']}, resumed on {now['device']}")
    elif now["device"] == "cuda" and len(saved["cuda"]) != torch.cuda.device_count():
        reasons.append(f"the CUDA generators were saved for {len(saved['cuda'])} devices, {torch.cuda.device_count()} "
                       "are visible: not restored")
    if now["device"] == "cuda" and not (saved["deterministic"] and now["deterministic"]):
        reasons.append("trained on a GPU without runtime.deterministic=true: its kernels do not repeat bit for bit")
    return reasons


def finished_reason(trainer) -> str:
    """What had ended the training at the restored update (fairseq stopped there and saved, then the
    process was killed before it said ``done training``), else "". fairseq's loop would train one
    more update before it checks; an epoch cap and ``stop_min_lr`` it checks before an epoch itself."""
    cfg, updates = trainer.cfg, trainer.get_num_updates()
    if cfg.optimization.max_update and updates >= cfg.optimization.max_update:
        return "max_update"
    hours = cfg.optimization.stop_time_hours
    if hours > 0 and trainer.cumulative_training_time() / 3600 > hours:
        return "time_cap"
    patience = cfg.checkpoint.patience
    if patience > 0 and getattr(early_stopping(), "num_runs", 0) >= patience:
        return "early_stop"
    return ""
