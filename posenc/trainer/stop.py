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
  after it restored a checkpoint, with its update count; the harness reads them into the record's
  ``resume_exact``.
"""

import signal

SAVE_AND_STOP = signal.SIGTERM
IGNORED = (signal.SIGUSR2,)
STOPPED_MARK = "posenc: training stopped on request, checkpoint saved at update"
STOPPED_EXIT = 75  # EX_TEMPFAIL: try again later (resume)
EXACT_RESUME_MARK = "posenc: exact resume, random states and first-epoch batches restored at update"
INEXACT_RESUME_MARK = "posenc: inexact resume at update"
