"""The training process: what runs as ``python -m posenc.trainer.train`` for each cell (fairseq-train
with save-and-stop, exact resume and decoding in the trainer), the warm trainer that forks it, and the
memory estimate a sweep's start asks of a child. The harness starts these processes and reads their
marks (``stop``, ``decode``); it never imports torch, so nothing here imports torch at package level."""
