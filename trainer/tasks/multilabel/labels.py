"""Multi-label labels: label names joined in one cell, or one 0/1 column per label
(--label-columns); each row's rarest label is what trainer.prepare stratifies on."""

import difflib

import numpy as np

from trainer.data.labels import LabelSpec, as_number, is_missing, merge_small_strata
from trainer.errors import UserError
from trainer.reading import where


def _cell_names(value, separator: str) -> list[str]:
    if is_missing(value):
        return []
    return [name.strip() for name in str(value).split(separator) if name.strip()]


def infer_multi_labels(frame, column: str, config) -> LabelSpec:
    """Multi-label: the 0/1 --label-columns, or the names found in the label column's cells
    (--label-names fixes them and their order)."""
    if config.label_columns:
        names = [c.strip() for c in config.label_columns.split(",") if c.strip()]
        return LabelSpec("columns", names)
    separator = config.label_separator
    given = [n.strip() for n in config.label_names.split(",")] if config.label_names else None
    seen = sorted({name for value in frame[column].tolist() for name in _cell_names(value, separator)})
    if not given and len(seen) < 2:
        raise UserError(
            f"{frame['_file'].iloc[0]}: column {column!r} holds fewer than two label "
            f"names ({seen}) split by --label-separator {separator!r}"
        )
    return LabelSpec("names", given or seen, separator)


def encode_multi_labels(frame, column: str, spec: LabelSpec) -> np.ndarray:
    """float32 [rows, labels] of 0/1; an unknown name or a value other than 0/1 is an error."""
    targets = np.zeros((len(frame), len(spec.names)), np.float32)
    if spec.kind == "columns":
        for j, name in enumerate(spec.names):
            for i, value in enumerate(frame[name].tolist()):
                number = None if is_missing(value) else as_number(value)
                if number not in (0.0, 1.0):
                    raise UserError(
                        f"{where(frame, i, name)}: {value!r} is not 0 or 1 (a "
                        f"--label-columns column marks its label with 1)"
                    )
                targets[i, j] = number
        return targets
    index = {name: j for j, name in enumerate(spec.names)}
    for i, value in enumerate(frame[column].tolist()):
        for name in _cell_names(value, spec.separator):
            if name not in index:
                raise UserError(
                    f"{where(frame, i, column)}: label {name!r} is not one of the training data's labels {spec.names}"
                )
            targets[i, index[name]] = 1.0
    return targets


def check_label_sizes(frame, column: str, targets: np.ndarray, names, minimum: int) -> None:
    """--min-examples-per-class for multi-label training data: every label needs `minimum` rows
    carrying it, to be learned and to get a threshold. A rarer label is usually a typo in a cell
    (`postive`) or a --label-columns column that is nearly all 0: stop, naming the label, its
    rows and count, and for a label name a well-populated one it may be a misspelling of.

    `frame` is the training frame (`_file`, `_row` columns), `targets` its 0/1 [rows, labels];
    `column` the label column, or None for --label-columns (each label is its own column).
    """
    counts = (np.asarray(targets) > 0.5).sum(axis=0)
    rare = [j for j, count in enumerate(counts) if count < minimum]
    if not rare:
        return
    j = rare[0]
    rows = np.flatnonzero(np.asarray(targets)[:, j] > 0.5)
    shown = ", ".join(str(frame["_row"].iloc[i]) for i in rows[:5]) + (", ..." if len(rows) > 5 else "")
    source = frame["_file"].iloc[rows[0]] if len(rows) else ", ".join(sorted(set(frame["_file"])))
    at = f" ({'line' if len(rows) == 1 else 'lines'} {shown})" if len(rows) else ""
    hint = ""
    if column is not None:
        common = [n for n, count in zip(names, counts) if count >= minimum]
        close = difflib.get_close_matches(names[j], common, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UserError(
        f"{source}: label {names[j]!r}{at}, column {column or names[j]!r}: on {len(rows)} "
        f"of {len(targets)} training rows, fewer than --min-examples-per-class "
        f"{minimum}.{hint} Fix the labels, add examples, or lower the flag to keep so "
        f"rare a label"
    )


def rarest_labels(labels: np.ndarray, minimum: int) -> np.ndarray:
    """Each row's rarest label ([rows, labels] 0/1; -1 for a row without labels), small
    strata pooled."""
    carried = labels > 0.5
    frequency = np.where(carried, carried.sum(axis=0), np.iinfo(np.int64).max)
    return merge_small_strata(np.where(carried.any(axis=1), frequency.argmin(axis=1), -1), minimum)
