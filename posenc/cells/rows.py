"""A row of a table or of an adaptive sweep (one configuration, all its seeds): its name and its
baseline row, computed here once for the report, the sweepers and the figures."""

DEFAULT_BASELINE = ("placement", "both")   # (key, value) of the row every other row is compared with
BASELINE = "=".join(DEFAULT_BASELINE)      # the same as a setting writes it: the sweepers' default


def row_name(values: dict, keys=None) -> str:
    """``placement=none`` or ``model=fconv_small,placement=none``: the values of ``keys`` (default
    every key), in their order; ``the one row`` where there are none."""
    shown = values if keys is None else {k: v for k, v in values.items() if k in keys}
    return ",".join(f"{k}={v}" for k, v in shown.items()) or "the one row"


def varying(rows: list) -> list:
    """The keys whose values differ between ``rows`` (dicts of key -> value), in first-seen order."""
    keys = list(dict.fromkeys(k for values in rows for k in values))
    return [k for k in keys if len({str(values.get(k)) for values in rows}) > 1]


def baseline_of(rows: list, key: str, value) -> list:
    """For each row (a dict of its values), the index of its baseline row: the row equal to it in
    every value but ``key``, with ``key`` at ``value`` (its own index for a baseline); None where
    its group has no such row."""
    def rest(values):
        return tuple(sorted((k, str(v)) for k, v in values.items() if k != key))
    bases = {rest(values): index for index, values in enumerate(rows) if str(values.get(key)) == str(value)}
    return [bases.get(rest(values)) for values in rows]
