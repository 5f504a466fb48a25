"""What every task's labels share: the LabelSpec a task reads its training labels into, what a
missing cell and a number are, and the pooling of strata too small to split."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class LabelSpec:
    """How raw label values become the labels a model trains on; learned from the training file
    by the task (Task.label_spec), saved with the run (metrics.json's labels and label_kind)."""

    kind: str  # "score" | "index" | "name" (classes); "number" (regression: no classes);
    # "names" (multi-label: names joined by `separator` in one cell) | "columns" (one 0/1 column each)
    names: list[str]
    separator: str = "|"

    def to_dict(self):
        return {"kind": self.kind, "names": list(self.names)}


def is_missing(value) -> bool:
    return (
        value is None
        or (isinstance(value, float) and np.isnan(value))
        or (isinstance(value, str) and value.strip().lower() in ("", "nan", "null", "none", "na"))
    )


def as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def merge_small_strata(strata: np.ndarray, minimum: int) -> np.ndarray:
    """Strata with fewer than `minimum` rows pooled into one; a pool still that small joins the
    largest stratum (stratification only needs them to be split in proportion)."""
    values, counts = np.unique(strata, return_counts=True)
    small = np.isin(strata, values[counts < minimum])
    if not small.any():
        return strata
    merged = strata.copy()
    if small.sum() >= minimum or small.all():
        merged[small] = values[counts < minimum][0]
    else:
        merged[small] = values[np.argmax(counts)]
    return merged
