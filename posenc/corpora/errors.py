"""The one exception the corpus layer raises for bad input or an unusable recipe."""


class CorpusError(ValueError):
    """Bad corpus input, refused before any training.

    The message is always ONE line that names the file, line or value at fault and what is
    allowed, so the harness can print it as it is, without a traceback.
    """

    def __init__(self, message: str):
        # Keep the one-line promise even when a caller passes a multi-line reason.
        super().__init__(" ".join(str(message).split()))
