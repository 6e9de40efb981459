"""How the harness asks fairseq-train to save a checkpoint at once and stop, and how the trainer
says it did: shared by the trainer entry (``posenc.trainer.train``, inside fairseq's process) and
the harness (``posenc.harness``), which never imports fairseq itself.

- ``SAVE_AND_STOP`` (SIGTERM) to the trainer: it finishes the update it is in, saves
  ``checkpoint_last.pt`` (no validation first, the time before a SIGKILL being short, unless
  fairseq validates and saves at that update anyway: then as it would), prints
  ``STOPPED_MARK`` and exits with ``STOPPED_EXIT``. fairseq's own stop path logs ``done training``
  too; the mark after it says that training did not finish.
- SIGUSR2 is ignored by the trainer: SLURM's warning of a time limit (submitit's ``--signal=USR2``)
  goes to every process of the job, and USR2's default action would kill fairseq outright; the
  harness turns it into a save-and-stop instead.
- ``EXACT_RESUME_MARK`` / ``INEXACT_RESUME_MARK``: printed by the trainer (``posenc.trainer.exact_resume``)
  after it restored a checkpoint, with its update count (and, when inexact, why in parentheses); the
  harness reads them into the record's ``resume_exact`` and ``resume_inexact_reason``.
- ``FINISHED_MARK REASON``: the checkpoint a trainer resumed from is where training had ended
  (``max_update``, ``time_cap``, ``early_stop``: killed after its last save); it trains no further,
  and the harness reads the reason into ``stopped_by``.
- ``RESUME_VERSION``: what the trainer's checkpoints hold for an exact resume; ``state.json``'s
  ``exact_resume`` says which version wrote a cell's checkpoints.
"""

import signal

SAVE_AND_STOP = signal.SIGTERM
IGNORED = (signal.SIGUSR2,)
STOPPED_MARK = "posenc: training stopped on request, checkpoint saved at update"
STOPPED_EXIT = 75  # EX_TEMPFAIL: try again later (resume)
EXACT_RESUME_MARK = "posenc: exact resume, random states and first-epoch batches restored at update"
INEXACT_RESUME_MARK = "posenc: inexact resume at update"
FINISHED_MARK = "posenc: resumed where training had ended, trained no further:"
# 1: the random states (issue 48); 2: also the plateau scheduler, early stopping, the fp16 loss scaler,
# the world size, the device and the deterministic mode (issue 58); 3: also the lr the loop checked
# against --stop-min-lr before the epoch a checkpoint was saved in.
RESUME_VERSION = 3
