"""Composing the project's Hydra config in a pytest process that may also have imported fairseq."""

import pytest


@pytest.fixture(autouse=True)
def without_fairseq_config_store():
    """fairseq registers its own ``config`` schema and groups in Hydra's global ConfigStore when it
    is imported (other tests in this process do); hide them while a test composes ours."""
    from hydra.core.config_store import ConfigStore
    repo = ConfigStore.instance().repo
    hidden = {k: repo.pop(k) for k in list(repo) if k not in ("hydra", "_dummy_empty_config_.yaml")}
    yield
    repo.update(hidden)
