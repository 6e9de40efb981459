"""The ``logger`` group checked with the rest of the cell: which loggers exist, and that the package
the chosen one needs imports. A refusal here comes before any work, like every other; the W&B run
itself is ``posenc.harness.tracking.wandb_run``'s, which imports W&B through ``import_wandb`` so that
the refusal's words have one home and the cell room never reaches up into tracking.
"""

from posenc.harness.errors import ConfigError

LOGGERS = ("none", "wandb")
GROUP_MAX = 128  # W&B's limits on a group name and on a tag
TAG_MAX = 64


def import_wandb():
    try:
        import wandb
    except ImportError:
        raise ConfigError("logger=wandb needs the wandb package: "
                          "make setup (or pip install 'wandb>=0.16,<1')") from None
    return wandb


def check_logger(logger) -> None:
    """``logger.name`` is known and, for W&B, the package imports and the user's group and tags are what
    W&B takes; raise ConfigError."""
    if logger.name == "none":
        return
    if logger.name != "wandb":
        raise ConfigError(f"logger={logger.name!r} is not allowed; allowed: {', '.join(LOGGERS)}")
    check_labels(logger.get("group"), logger.get("tags"))
    import_wandb()


def check_labels(group, tags) -> None:
    """``logger.group`` (at most GROUP_MAX characters) and ``logger.tags`` (a list of texts of at
    most TAG_MAX characters), null or empty where unset. (``logger.notes`` is any text.)"""
    if group is not None and len(str(group)) > GROUP_MAX:
        raise ConfigError(f"logger.group={group!r} is not allowed; allowed: a name of at most {GROUP_MAX} characters")
    if tags is not None and (isinstance(tags, str) or not all(isinstance(t, (str, int, float)) for t in tags)):
        raise ConfigError(f"logger.tags={tags!r} is not allowed; allowed: a list, e.g. logger.tags=[baseline,v2]")
    long = [str(t) for t in tags or [] if len(str(t)) > TAG_MAX]
    if long:
        raise ConfigError(f"logger.tags: {long[0]!r} is {len(long[0])} characters; W&B allows at most {TAG_MAX}")
