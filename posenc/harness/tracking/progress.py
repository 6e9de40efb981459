"""One status line per epoch, so a sweep of many minutes is never silent."""

import sys
import time

from posenc.harness.fairseq_logs import parse_record


class CellProgress:
    """Turns fairseq's JSON records into ``[cell i/N placement=.. seed=..] epoch 3 | valid ppl ..`` lines."""

    def __init__(self, label: str, max_epoch: int, max_time_min: float, enabled: bool = True, stream=None):
        self.label, self.max_epoch, self.max_time_s = label, max_epoch, max_time_min * 60
        self.enabled, self.stream = enabled, stream or sys.stderr
        self.started = time.monotonic()

    def say(self, message: str) -> None:
        if self.enabled:
            print(f"[{self.label}] {message}", file=self.stream, flush=True)

    def on_train_line(self, line: str) -> None:
        parsed = parse_record(line)
        if not parsed or parsed[0] != "valid":
            return
        rec = parsed[1]
        epoch = int(rec.get("epoch", 0))
        elapsed = time.monotonic() - self.started
        self.say(f"epoch {epoch} | valid ppl {rec.get('valid_ppl', '?')} | updates {rec.get('valid_num_updates', '?')} "
                 f"| {elapsed:.0f}s elapsed{self._eta(epoch, elapsed)}")

    def _eta(self, epoch: int, elapsed: float) -> str:
        estimates = []
        if self.max_epoch and epoch:
            estimates.append(elapsed / epoch * (self.max_epoch - epoch))
        if self.max_time_s:
            estimates.append(max(self.max_time_s - elapsed, 0.0))
        return f" | training ends in ~{min(estimates):.0f}s" if estimates else ""
