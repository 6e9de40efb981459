"""``python tests/resume_driver.py PLAN.json``: runs of the cells' trainer (``posenc.trainer.train``), one
after another, each stopped by a real signal at a chosen update; what each run returned goes to
the plan's ``result`` file.

The plan: ``{"runs": [{"argv": [...], "stop_at": N, "signal": "TERM" | "KILL" | "KILL_SAVED" | "",
"log": PATH}, ...], "result": PATH}``. Each run is a process of its own, forked from this one after it
imported what a fresh ``python -m posenc.trainer.train`` imports (as the warm trainer does,
``posenc.trainer.warm``; ``tests/test_warm_trainer.py`` shows the two train alike), so a chain of
runs pays torch's and fairseq's imports once. In run ``i`` the trainer sends itself the signal:

- ``TERM``, ``KILL``: as soon as update ``stop_at`` ended, before anything that update would save:
  SIGTERM takes the trainer's own save-and-stop path, SIGKILL kills it outright, as ``kill -9`` at
  that moment would (what survives is the checkpoint saved last);
- ``KILL_SAVED``: SIGKILL once update ``stop_at``'s own validation and save are done (the last save
  of a training that ends there: killed before fairseq says ``done training``).

``stop_at`` 0: never. Each run's stdout and stderr go to its ``log``."""

import json
import os
import signal
import sys

import posenc.trainer.train as entry  # first, as in the real entry (fairseq's logging)


def run(spec: dict) -> None:
    """The forked trainer of one run (never returns)."""
    code = 1
    try:
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        stop_at, signame = spec["stop_at"], spec["signal"]
        stock_agreed, stock_save = entry.stop_agreed, entry._STOCK_VALIDATE_AND_SAVE

        def stop_agreed(trainer):
            if signame in ("TERM", "KILL") and trainer.get_num_updates() == stop_at:
                os.kill(os.getpid(), getattr(signal, f"SIG{signame}"))
            return stock_agreed(trainer)

        def validate_and_save(cfg, trainer, *args):
            out = stock_save(cfg, trainer, *args)
            if signame == "KILL_SAVED" and trainer.get_num_updates() == stop_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        entry.stop_agreed, entry._STOCK_VALIDATE_AND_SAVE = stop_agreed, validate_and_save
        entry.install_handlers()
        entry.main(spec["argv"])
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    plan = json.loads(open(sys.argv[1]).read())
    codes = []
    for spec in plan["runs"]:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            run(spec)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    with open(plan["result"], "w") as out:
        json.dump(codes, out)


if __name__ == "__main__":
    main()
