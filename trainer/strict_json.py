"""JSON as RFC 8259 defines it, for every JSON file the trainer writes.

Python's json module writes a float NaN or infinity as the bare tokens `NaN` and `Infinity` by
default, which no strict parser accepts (JavaScript's JSON.parse, jq, Go, BigQuery): a file with
one of them cannot be read at all. Here such a value is written as `null`, "no value", on
purpose, and anything else that JSON cannot hold is still refused (allow_nan=False).
"""

import json
import math


def dumps(value, **kwargs) -> str:
    """json.dumps of `value` with every non-finite float (numpy's too) written as null."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(value):
    if hasattr(value, "dtype") and hasattr(value, "item") and not hasattr(value, "__len__"):
        value = value.item()  # a numpy scalar (float32 is not a Python float): no numpy import,
        # so `--help` of the tools that write JSON loads no heavy module
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
