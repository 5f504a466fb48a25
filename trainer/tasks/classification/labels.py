"""Classification labels: scores, class ids or class names, decided from the training file.

Every error names the row that is wrong: the file, its line and the column. The rule for
`--label-type auto`: labels that are mostly words are class names; integers that run 0..K-1 are
class ids; other integers (star ratings 1-5) are class names, so that no class exists without
rows; other numbers are sentiment scores. The run logs which it chose.
"""

import difflib
import logging

import numpy as np

from trainer.data.labels import LabelSpec, as_number, is_missing
from trainer.errors import UserError
from trainer.reading import name_key, where

log = logging.getLogger("trainer")

SCORE_NAMES = ("negative", "neutral", "positive")


def infer_labels(frame, column: str, config) -> LabelSpec:
    """Decide what the label column holds, from the training file (`config`: the DataConfig)."""
    given_names = [n.strip() for n in config.label_names.split(",")] if config.label_names else None
    values = frame[column].tolist()
    for i, value in enumerate(values):
        if is_missing(value):
            raise UserError(f"{where(frame, i, column)}: label is missing")
    kind = config.label_type
    if kind == "auto":
        kind = _infer_kind(frame, column, values, bool(given_names))
    if kind == "score":
        names = given_names or list(SCORE_NAMES)
        if len(names) != 3:
            raise UserError(f"--label-names: sentiment scores map to three classes, got {names}")
    elif kind == "index":
        ids = [as_number(v) for v in values]
        bad = next((i for i, x in enumerate(ids) if x is None or x != int(x) or x < 0), None)
        if bad is not None:
            raise UserError(f"{where(frame, bad, column)}: {values[bad]!r} is not a class id (0, 1, 2, ...)")
        count = int(max(ids)) + 1
        if given_names and count > len(given_names):
            bad = next(i for i, x in enumerate(ids) if x >= len(given_names))
            raise UserError(
                f"{where(frame, bad, column)}: class id {int(ids[bad])} but "
                f"--label-names names only {len(given_names)} classes"
            )
        names = given_names or [str(i) for i in range(count)]
    else:
        seen = sorted({str(v).strip() for v in values})
        if given_names:
            unknown = [s for s in seen if s not in given_names]
            if unknown:
                bad = next(i for i, v in enumerate(values) if str(v).strip() == unknown[0])
                raise UserError(
                    f"{where(frame, bad, column)}: label {unknown[0]!r} is not one of --label-names {given_names}"
                )
        names = given_names or _sorted_names(seen)
    spec = LabelSpec(kind, names)
    log.info("label column %r: %s", column, _rule(spec, config.label_type))
    return spec


def _sorted_names(names: list[str]) -> list[str]:
    """Class names in order: by value when all are numbers (1, 2, 10), else as strings."""
    numbers = [as_number(n) for n in names]
    if None in numbers:
        return sorted(names)
    return [n for _, n in sorted(zip(numbers, names))]


def _rule(spec: LabelSpec, label_type: str) -> str:
    """What the run made of the labels, and why, for the log."""
    chosen = "" if label_type == "auto" else " as --label-type says"
    if spec.kind == "score":
        return f"sentiment scores{chosen}: < 0 {spec.names[0]}, 0 {spec.names[1]}, > 0 {spec.names[2]}"
    if spec.kind == "index":
        return f"class ids 0..{len(spec.names) - 1}{chosen or ' (integers from 0)'}: {', '.join(spec.names)}"
    numbers = None not in [as_number(n) for n in spec.names]
    why = (
        " (integers that do not run 0..K-1 are names, so that no class is empty; --label-type index reads ids 0..K-1)"
        if numbers and not chosen
        else chosen
    )
    return f"{len(spec.names)} class names{why}: {', '.join(spec.names)}"


def _infer_kind(frame, column: str, values: list, named: bool) -> str:
    """Mostly names: 'name'. Numbers: non-negative integers are class ids when they run 0..K-1
    or --label-names names them (`named`), else names (1-5 star ratings would otherwise get an
    empty class 0); other numbers are scores. A few words among numbers (`two` among 0/1/2) are
    errors at their own row, not a guess."""
    numbers = [as_number(v) for v in values]
    words = [i for i, x in enumerate(numbers) if x is None]
    if len(words) * 2 > len(values):
        return "name"
    if words:
        bad = words[0]
        raise UserError(
            f"{where(frame, bad, column)}: label {values[bad]!r} is not a number, while "
            f"{len(values) - len(words)} of {len(values)} labels are; fix the row or "
            f"pass --label-type name"
        )
    if all(x == int(x) and x >= 0 for x in numbers):
        ids = sorted({int(x) for x in numbers})
        return "index" if named or ids == list(range(len(ids))) else "name"
    return "score"


def check_no_empty_class(frame, column: str, ids: np.ndarray, spec: LabelSpec, named: bool) -> None:
    """A class without training rows would be an output the model never learns: refuse it,
    saying where it came from (`named`: --label-names is given)."""
    counts = np.bincount(ids, minlength=len(spec.names))
    empty = [name for name, count in zip(spec.names, counts) if not count]
    if not empty:
        return
    if spec.kind == "score":
        hint = (
            "scores only on one side of 0 or none at 0 leave a class empty: pass --label-type "
            "name to take the values as class names"
        )
    elif named:
        hint = "drop it from --label-names, or add rows of it"
    else:
        hint = (
            "class ids must run 0..K-1 with rows of each (1-5 star ratings? pass "
            "--label-type name, or leave --label-type auto)"
        )
    some = "class" if len(empty) == 1 else "classes"
    raise UserError(
        f"{frame['_file'].iloc[0]}: {some} {', '.join(map(repr, empty))} of column "
        f"{column!r} {'has' if len(empty) == 1 else 'have'} no rows in the training "
        f"data; {hint}"
    )


def check_label_variants(frame, column: str, ids: np.ndarray, spec: LabelSpec) -> None:
    """`Positive` and `positive` (or the NFC and NFD spellings of `café`) are nearly always one
    class written two ways, whatever their sizes: refuse them, naming both, unless
    --allow-label-variants keeps them apart (the caller skips this check then)."""
    if spec.kind != "name":
        return
    counts, seen = np.bincount(ids, minlength=len(spec.names)), {}
    for label, name in enumerate(spec.names):
        other = seen.setdefault(name_key(name), label)
        if other == label:
            continue
        first = lambda c: frame["_row"].iloc[np.flatnonzero(ids == c)[0]]  # noqa: E731
        raise UserError(
            f"{frame['_file'].iloc[np.flatnonzero(ids == other)[0]]}: labels "
            f"{spec.names[other]!r} ({counts[other]} rows, first on line {first(other)}) and "
            f"{name!r} ({counts[label]} rows, first on line {first(label)}), column {column!r}, "
            f"differ only in case or Unicode normalization: make them one label, or pass "
            f"--allow-label-variants to keep two classes"
        )


# A class is rare against the others when the largest class has this many times its rows.
RARE_AGAINST_LARGEST = 3
# difflib ratio from which two labels are near-identical: 'postive'/'positive' 0.93,
# 'Negative'/'negative' 0.88; 'negative'/'positive' (0.5) are two real classes.
NEAR_IDENTICAL = 0.8


def check_class_sizes(frame, column: str, ids: np.ndarray, spec: LabelSpec, minimum: int) -> None:
    """A class with a handful of rows among large ones is nearly always a typo (`postive`):
    stop, naming its rows and the near-identical known label. A small class is a typo only when
    it is rare against the others or near-identical to another label: in a tiny balanced file
    (4 rows of each of 3 classes, a first smoke test) every class is small and none is a typo."""
    counts = np.bincount(ids, minlength=len(spec.names))
    for label in range(len(spec.names)):
        if not 0 < counts[label] < minimum:
            continue
        others = [n for c, n in enumerate(spec.names) if c != label and counts[c]]
        close = difflib.get_close_matches(spec.names[label], others, n=1, cutoff=NEAR_IDENTICAL)
        if close or counts[label] * RARE_AGAINST_LARGEST <= counts.max():
            _refuse_small_class(
                frame, column, ids, spec, label, minimum, f"did you mean {close[0]!r}?" if close else "a typo?"
            )


def _refuse_small_class(
    frame, column: str, ids: np.ndarray, spec: LabelSpec, label: int, minimum: int, hint: str
) -> None:
    rows = np.flatnonzero(ids == label)
    shown = ", ".join(str(frame["_row"].iloc[i]) for i in rows[:5]) + (", ..." if len(rows) > 5 else "")
    raise UserError(
        f"{frame['_file'].iloc[rows[0]]}: {spec.names[label]!r} "
        f"({'line' if len(rows) == 1 else 'lines'} {shown}), column {column!r}: {hint} "
        f"Class {spec.names[label]!r} has {len(rows)} of {len(ids)} rows, fewer than "
        f"--min-examples-per-class {minimum}; fix the label, or lower the flag to keep "
        f"so small a class"
    )


def encode_labels(frame, column: str, spec: LabelSpec, split_name: str) -> np.ndarray:
    """Raw label values -> class ids under `spec`; unknown or malformed values are errors."""
    ids = np.empty(len(frame), dtype=np.int32)
    index = {name: i for i, name in enumerate(spec.names)}
    for i, value in enumerate(frame[column].tolist()):
        if is_missing(value):
            raise UserError(f"{where(frame, i, column)}: label is missing")
        if spec.kind == "name":
            key = str(value).strip()
            if key not in index:
                close = [n for n in spec.names if name_key(n) == name_key(key)]
                raise UserError(
                    f"{where(frame, i, column)}: label {key!r} never appears in the "
                    f"training data (labels: {spec.names})" + (f"; did you mean {close[0]!r}?" if close else "")
                )
            ids[i] = index[key]
            continue
        number = as_number(value)
        if number is None:
            raise UserError(f"{where(frame, i, column)}: {value!r} is not a number")
        if spec.kind == "score":
            if not -1.0 <= number <= 1.0:
                raise UserError(
                    f"{where(frame, i, column)}: sentiment score {number} is outside "
                    f"[-1, 1] (a numeric target, like a similarity? pass --task regression)"
                )
            ids[i] = 0 if number < 0 else (1 if number == 0 else 2)
        else:
            if number != int(number) or not 0 <= number < len(spec.names):
                origin = "in the training data" if split_name != "train" else "in --label-names"
                raise UserError(
                    f"{where(frame, i, column)}: class id {value!r} is not among "
                    f"the {len(spec.names)} classes {origin} (labels: {spec.names})"
                )
            ids[i] = int(number)
    return ids


def check_classes(frame, column: str, ids: np.ndarray, spec: LabelSpec, data) -> None:
    """No class without rows, no two labels that differ only in case (unless the flag allows)."""
    check_no_empty_class(frame, column, ids, spec, bool(data.label_names))
    if not data.allow_label_variants:
        check_label_variants(frame, column, ids, spec)
