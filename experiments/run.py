#!/usr/bin/env python
"""The Hydra entry point, runnable without the console script: ``python experiments/run.py -m experiment=table4``.

Thin on purpose: configuration lives in conf/, the work in posenc.harness.
"""

from posenc.harness.app import main

if __name__ == "__main__":
    main()
