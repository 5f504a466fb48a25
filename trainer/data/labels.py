"""Label columns -> class ids: scores, class ids or class names, decided from the training file."""
import dataclasses
from typing import List

import numpy as np
import pandas as pd

from trainer.config import DataConfig
from trainer.data.reading import where
from trainer.errors import UserError

SCORE_NAMES = ("negative", "neutral", "positive")


@dataclasses.dataclass
class LabelSpec:
    """How raw label values become class ids; learned from the training file, saved with the run."""
    kind: str  # "score" | "index" | "name"
    names: List[str]

    def to_dict(self):
        return {"kind": self.kind, "names": list(self.names)}


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or (
        isinstance(value, str) and value.strip().lower() in ("", "nan", "null", "none", "na"))


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def infer_labels(frame: pd.DataFrame, column: str, config: DataConfig) -> LabelSpec:
    """Decide what the label column holds, from the training file."""
    given_names = [n.strip() for n in config.label_names.split(",")] if config.label_names else None
    values = frame[column].tolist()
    for i, value in enumerate(values):
        if is_missing(value):
            raise UserError(f"{where(frame, i, column)}: label is missing")
    kind = config.label_type
    if kind == "auto":
        numbers = [_as_number(v) for v in values]
        numeric = [x for x in numbers if x is not None]
        if len(numeric) * 2 < len(values):
            kind = "name"
        elif all(x is not None and x == int(x) and x >= 0 for x in numbers):
            kind = "index"
        else:
            kind = "score"
    if kind == "score":
        names = given_names or list(SCORE_NAMES)
        if len(names) != 3:
            raise UserError(f"--label-names: sentiment scores map to three classes, got {names}")
    elif kind == "index":
        ids = [_as_number(v) for v in values]
        bad = next((i for i, x in enumerate(ids) if x is None or x != int(x) or x < 0), None)
        if bad is not None:
            raise UserError(f"{where(frame, bad, column)}: {values[bad]!r} is not a class id "
                            f"(0, 1, 2, ...)")
        count = int(max(ids)) + 1
        if given_names and count > len(given_names):
            bad = next(i for i, x in enumerate(ids) if x >= len(given_names))
            raise UserError(f"{where(frame, bad, column)}: class id {int(ids[bad])} but "
                            f"--label-names names only {len(given_names)} classes")
        names = given_names or [str(i) for i in range(count)]
    else:
        seen = sorted({str(v).strip() for v in values})
        if given_names:
            unknown = [s for s in seen if s not in given_names]
            if unknown:
                bad = next(i for i, v in enumerate(values) if str(v).strip() == unknown[0])
                raise UserError(f"{where(frame, bad, column)}: label {unknown[0]!r} is not one "
                                f"of --label-names {given_names}")
        names = given_names or seen
    return LabelSpec(kind, names)


def encode_labels(frame: pd.DataFrame, column: str, spec: LabelSpec, split_name: str) -> np.ndarray:
    """Raw label values -> class ids under `spec`; unknown or malformed values are errors."""
    ids = np.empty(len(frame), dtype=np.int32)
    index = {name: i for i, name in enumerate(spec.names)}
    for i, value in enumerate(frame[column].tolist()):
        if is_missing(value):
            raise UserError(f"{where(frame, i, column)}: label is missing")
        if spec.kind == "name":
            key = str(value).strip()
            if key not in index:
                raise UserError(f"{where(frame, i, column)}: label {key!r} never appears in the "
                                f"training data (labels: {spec.names})")
            ids[i] = index[key]
            continue
        number = _as_number(value)
        if number is None:
            raise UserError(f"{where(frame, i, column)}: {value!r} is not a number")
        if spec.kind == "score":
            if not -1.0 <= number <= 1.0:
                raise UserError(f"{where(frame, i, column)}: sentiment score {number} is outside "
                                f"[-1, 1]")
            ids[i] = 0 if number < 0 else (1 if number == 0 else 2)
        else:
            if number != int(number) or not 0 <= number < len(spec.names):
                origin = "in the training data" if split_name != "train" else "in --label-names"
                raise UserError(f"{where(frame, i, column)}: class id {value!r} is not among "
                                f"the {len(spec.names)} classes {origin} (labels: {spec.names})")
            ids[i] = int(number)
    return ids
