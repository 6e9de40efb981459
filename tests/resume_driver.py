"""``python tests/resume_driver.py STOP_AT SIGNAL ARGS...``: the cells' trainer (``posenc.trainer.train``
with fairseq-train's ``ARGS``), which sends itself ``SIGNAL`` (``TERM`` or ``KILL``) as soon as
update ``STOP_AT`` ended, before anything that update would save: SIGTERM then takes the trainer's
own save-and-stop path, SIGKILL kills it outright, as ``kill -9`` at that moment would (what
survives is the checkpoint saved last). ``STOP_AT`` 0: never. A signal at a chosen update, so that
a test interrupts a cell inside an epoch or at its end every time."""

import os
import signal
import sys

import posenc.trainer.train as entry


def main() -> None:
    stop_at, signame, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    stock = entry.stop_agreed

    def stop_agreed(trainer):
        if trainer.get_num_updates() == stop_at:
            os.kill(os.getpid(), getattr(signal, f"SIG{signame}"))
        return stock(trainer)

    entry.stop_agreed = stop_agreed
    entry.main(argv)


if __name__ == "__main__":
    main()
