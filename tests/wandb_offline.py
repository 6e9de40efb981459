"""Reading the runs that W&B writes in offline mode (``wandb/offline-run-*/run-ID.wandb``).

A ``.wandb`` file is W&B's transaction log: a 7-byte header (``:W&B``, a magic number, a version)
followed by LevelDB-log records (32 KiB blocks; each chunk a 4-byte checksum, a 2-byte length, a
1-byte type: full, first, middle, last) whose payloads are W&B's own protobuf ``Record`` messages.
wandb >= 0.30 no longer ships a Python reader, so the tests decode the framing here and every
payload with wandb's own protobuf classes.
"""

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2

HEADER = 7
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path):
    """Every protobuf ``Record`` in one ``.wandb`` file, in order."""
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    pos, pending = HEADER, b""
    while pos + 7 <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < 7:  # the rest of a block too small for a chunk header is padding
            pos += left_in_block
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left_in_block  # zero padding to the end of the block
            continue
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            yield _parse(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield _parse(pending + chunk)
            pending = b""


def _parse(payload):
    record = wandb_internal_pb2.Record()
    record.ParseFromString(payload)
    return record


def _items(update):
    out = {}
    for item in update:
        key = ".".join(item.nested_key) if item.nested_key else item.key
        out[key] = json.loads(item.value_json)
    return out


@dataclass
class OfflineRun:
    """What one or more ``.wandb`` files of the same run id say, pieces merged in time order."""
    run_id: str
    name: str = ""
    group: str = ""
    job_type: str = ""
    project: str = ""
    notes: str = ""
    tags: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list = field(default_factory=list)   # (step, {key: value})
    exit_codes: list = field(default_factory=list)
    files: list = field(default_factory=list)      # the .wandb files read

    def add(self, path):
        self.files.append(Path(path))
        for rec in records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                run = rec.run
                self.name = run.display_name or self.name
                self.group, self.job_type, self.project = run.run_group or self.group, run.job_type or self.job_type, \
                    run.project or self.project
                self.tags = list(run.tags) or self.tags
                self.notes = run.notes or self.notes
                self.config.update(_items(run.config.update))
                self.summary.update(_items(run.summary.update))
            elif kind == "config":
                self.config.update(_items(rec.config.update))
            elif kind == "summary":
                self.summary.update(_items(rec.summary.update))
            elif kind == "history":
                values = _items(rec.history.item)
                self.history.append((values.get("_step", rec.history.step.num), values))
            elif kind == "exit":
                self.exit_codes.append(rec.exit.exit_code)

    def values(self, key):
        return [(step, v[key]) for step, v in self.history if key in v]


def offline_runs(wandb_dir) -> dict:
    """``{run id: OfflineRun}`` for every offline run under a ``wandb`` directory."""
    runs = {}
    for path in sorted(Path(wandb_dir).glob("offline-run-*/run-*.wandb")):  # sorted = time order
        run_id = path.stem[len("run-"):]
        runs.setdefault(run_id, OfflineRun(run_id)).add(path)
    return runs
