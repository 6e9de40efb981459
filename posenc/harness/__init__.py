"""The experiment harness: one Hydra job = one cell (train, generate, score, record)."""
