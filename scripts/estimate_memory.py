#!/usr/bin/env python
"""Training memory of one cell, estimated on the CPU (``posenc.trainer.memory``, which the launcher also
asks how many cells fit on a GPU): parameters, optimizer state and the activations one batch keeps
for its backward pass.

    .venv/bin/python scripts/estimate_memory.py --arch posenc_fconv_table4 --vocab 40000 --max-tokens 4000

Extra arguments are the model's own fairseq flags (``--dropout 0.2``); ``--json`` prints the parts in bytes.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posenc.trainer.memory import main  # noqa: E402

if __name__ == "__main__":
    main()
