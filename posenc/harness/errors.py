"""The harness's one refusal: a configuration it will not run."""


class ConfigError(ValueError):
    """A configuration the harness refuses; the message is one line naming the value and what is allowed."""
