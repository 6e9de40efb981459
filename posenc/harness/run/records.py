"""The records a cell gets outside its training: refused before any work, stopped in a SLURM job
before training began, a requeue that submitit refused, a SLURM job that ended before its cell
reported. With the lifecycle's (a cell's run), these are the only places a cell's ``result.json``
is built and written (``tests/test_harness_floors.py``); each writes once and returns the record.
"""

from pathlib import Path

from posenc.cells.plan import override_values
from posenc.cells.record import Record, new_record
from posenc.harness.run import slurm_job


def refused(name, job_dir: Path, error: str) -> Record:
    """A sweep's cell refused before any work (a value it cannot take, ``name``: its ``CellName``):
    failed, with the refusal as its error, so the sweep goes on and its table shows the cell."""
    record = new_record(name.identity, job_dir, name.family, error)
    record.write(job_dir)
    return record


def unstarted(name, job_dir: Path, cause: str) -> Record:
    """A cell stopped in a SLURM job before its training began (start-up, the corpus), from its
    earlier record if it has one: a time limit fails it, since a requeue would stop at the same
    place; anything else interrupts it."""
    record = Record.read(job_dir) or new_record(name.identity, job_dir, name.family)
    if cause == slurm_job.TIME_LIMIT:
        record.fail("SLURM time limit reached before training began (start-up and the corpus took the time the "
                    "job had); not requeued: give it more time (hydra.launcher.timeout_min)")
    else:
        record.interrupt(f"{cause} before training began")
    record.write(job_dir)
    return record


def not_requeued(record: Record, job_dir: Path, refusal: str) -> Record:
    """An interrupted cell whose requeue submitit refused (``slurm_job.hand_over``'s answer): a
    failure that names why."""
    record.fail(f"{record.error}; but not requeued: {refusal} (hydra.launcher.max_num_timeout); a rerun resumes it")
    record.write(job_dir)
    return record


def ended_without_result(cell_dir: Path, job_id: str, state: str, overrides=()) -> None:
    """Why a cell's SLURM job ended before the cell reported (the submitter's side), keeping what its
    record says (a cell that never started gets its identity from its overrides)."""
    record = Record.read(cell_dir)
    if record and record.ok:
        return
    state = state or "ended (its final state is unknown: this cluster keeps no accounting)"
    word, _, rest = state.partition(" ")
    said = word.lower() if word.isupper() else word
    why = f"SLURM job {job_id} {said}{' ' + rest if rest else ''} before the cell finished"
    earlier = record.error if record else ""
    if record is None:
        record = new_record(override_values(overrides), cell_dir, None)
    why += f"; the cell had said: {earlier}" if earlier else ""
    if state.startswith("CANCELLED"):
        record.interrupt(why)
    else:
        record.fail(why)
    record.write(cell_dir)
