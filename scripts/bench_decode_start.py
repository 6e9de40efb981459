#!/usr/bin/env python
"""What decoding in the trainer saves, measured where wall times are noisy: a finished cell's stock
fairseq-generate line (``commands.sh``, with its exports) as a process of its own, against the same
decoding inside a process that has torch and fairseq imported already (``posenc.trainer.fairseq_decode``,
as the trainer runs it), in alternating order. Prints the wall and CPU seconds (user + system) of
each, per round and their medians; CPU seconds hardly move with the machine's load.

    .venv/bin/python scripts/bench_decode_start.py CELL_DIR [--rounds 4]
"""

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INSIDE = """
import json, resource, sys, time
from pathlib import Path
from posenc.trainer.fairseq_decode import generate_into  # torch and fairseq imported, as in the trainer
before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
generate_into(json.loads(sys.argv[1]), Path(sys.argv[2]))
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
print("INSIDE " + json.dumps({"wall": time.monotonic() - started, "cpu": cpu}))
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cell", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    lines = (args.cell / "commands.sh").read_text().splitlines()
    words = shlex.split(next(x for x in lines if x.endswith("> generate-test.log")))
    command = words[:words.index(">")]
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
           **dict(shlex.split(x)[1].split("=", 1) for x in lines if x.startswith("export "))}
    scratch = Path(tempfile.mkdtemp(prefix="posenc-decode-start-"))
    runs = {"own process": [], "in a loaded process": []}
    for i in range(args.rounds):
        for side in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
            if side == "own process":
                cpu, started = children_cpu(), time.monotonic()
                with open(scratch / "stock.log", "w") as out:
                    subprocess.run(command, cwd=args.cell, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
                runs[side].append({"wall": time.monotonic() - started, "cpu": children_cpu() - cpu})
            else:
                proc = subprocess.run([sys.executable, "-c", INSIDE, json.dumps(command[3:]), str(scratch / "in.log")],
                                      cwd=args.cell, env=env, capture_output=True, text=True, check=True)
                runs[side].append(json.loads(proc.stdout.split("INSIDE ", 1)[1]))
        sides = ", ".join(f"{k} {v[-1]['wall']:.1f}s wall, {v[-1]['cpu']:.1f}s CPU" for k, v in runs.items())
        print(f"round {i + 1}: {sides} (load {os.getloadavg()[0]:.2f})", flush=True)
    for side, values in runs.items():
        print(f"{side}: median {statistics.median(v['wall'] for v in values):.1f}s wall, "
              f"{statistics.median(v['cpu'] for v in values):.1f}s CPU")


if __name__ == "__main__":
    main()
