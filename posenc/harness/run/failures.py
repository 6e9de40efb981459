"""One-line reasons for a fairseq step that went wrong: divergence, out of memory, a crash, a kill."""

import math
import re
import signal

from posenc.harness.fairseq_logs import parse_record, record_updates, resumed_from

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): ?(.*)$")
# A GPU that ran out of memory, as torch and fairseq say it (the kernel's OOM killer is the host's, not the GPU's),
# and the other ways a GPU others fill refuses a cell: a GPU in Exclusive_Process mode that another process
# holds ("CUDA-capable device(s) is/are busy or unavailable"), and cuBLAS that cannot create its handle on a
# nearly full GPU (CUBLAS_STATUS_NOT_INITIALIZED at cublasCreate). Run alone, such a cell gets the GPU.
_GPU_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED"
                      r"|CUBLAS_STATUS_NOT_INITIALIZED|busy or unavailable")
# fairseq's trainer catches an OOM in the forward or backward pass, says this, and drops the batch.
SKIPPED_BATCH = "attempting to recover from OOM in forward/backward pass"
SKIP_REASON = "out of GPU memory beside other cells: fairseq skipped a batch (CUDA out of memory)"
_LOSS_KEYS = ("loss", "train_loss", "valid_loss", "nll_loss", "train_nll_loss", "valid_nll_loss")


def non_finite_loss(line: str):
    """``loss is inf at update 3`` when a fairseq record on this line reports a NaN or infinite
    loss, else None."""
    parsed = parse_record(line)
    if not parsed:
        return None
    kind, rec = parsed
    for key in _LOSS_KEYS:
        if key in rec:
            try:
                value = float(rec[key])
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value):
                return (f"{key.replace('train_', '').replace('valid_', 'valid ')} is {value} "
                        f"at update {record_updates(kind, rec)}")
    return None


def gpu_out_of_memory(error: str) -> bool:
    """Whether a failed step's one-line error says the GPU ran out of memory, or was too full or taken
    by another process to start the cell (``_GPU_OOM``): a cell that shared its GPU is run again alone."""
    return bool(_GPU_OOM.search(error or ""))


def skipped_batch(line: str):
    """A reason to stop a cell that shares its GPU when fairseq dropped a batch that did not fit
    (the run would then differ from the same cell alone), else None."""
    return SKIP_REASON if SKIPPED_BATCH in line else None


def last_update(log_lines) -> int:
    """The highest update count the log shows (records, or the checkpoint a run restored)."""
    seen = resumed_from(log_lines)
    for line in log_lines:
        parsed = parse_record(line)
        if parsed:
            seen = max(seen, record_updates(*parsed))
    return seen


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; the bare number for one the signal module has no name for."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def exit_reason(name: str, returncode: int, log_lines) -> str:
    """Why ``name`` ended with ``returncode``: one line, from its log where the log says."""
    errors = [m for m in (_EXCEPTION.match(ln.strip()) for ln in log_lines) if m]
    last = errors[-1] if errors else None
    if last and last.group(1).endswith("FloatingPointError"):
        # fairseq raises before logging the update it failed in: name the earliest it can be.
        return (f"training diverged in update {last_update(log_lines) + 1} or later: "
                f"{last.group(2) or 'loss or gradients are NaN or inf'} (fairseq's FloatingPointError)")
    if last and re.search(r"out of memory", last.group(0), re.IGNORECASE):
        return f"out of memory: {last.group(0)[:300]}"
    if returncode < 0:
        name_of = signal_name(-returncode)
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if -returncode == signal.SIGKILL else ""
        return f"{name} was killed by {name_of}{hint}"
    if last:
        return f"{name} exited with status {returncode}: {last.group(0)[:300]}"
    lines = [ln.strip() for ln in log_lines if ln.strip()]
    return f"{name} exited with status {returncode}: {lines[-1][:300] if lines else 'no output'}"
