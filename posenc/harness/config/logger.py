"""The ``logger`` group checked with the rest of the cell: which loggers exist, and that the package
the chosen one needs imports. A refusal here comes before any work, like every other; the W&B run
itself is ``posenc.harness.tracking.wandb_run``'s, which imports W&B through ``import_wandb`` so that
the refusal's words have one home and the cell room never reaches up into tracking.
"""

from posenc.harness.errors import ConfigError

LOGGERS = ("none", "wandb")


def import_wandb():
    try:
        import wandb
    except ImportError:
        raise ConfigError("logger=wandb needs the wandb package: "
                          "make setup (or pip install 'wandb>=0.16,<1')") from None
    return wandb


def check_logger(logger) -> None:
    """``logger.name`` is known and, for W&B, the package imports; raise ConfigError."""
    if logger.name == "none":
        return
    if logger.name != "wandb":
        raise ConfigError(f"logger={logger.name!r} is not allowed; allowed: {', '.join(LOGGERS)}")
    import_wandb()
