"""errors.csv: the validation and test examples the model gets wrong, worst first; then, if
asked (--report-correct), the least confident ones it gets right, the `outcome` column saying
which is which. A list of the highest-loss rows alone would, for a model that errs on few rows,
fill up with correct predictions at 0.999 (issue #23).

How wrong is measured on the exported model's own outputs (Task.error_measure), so the list
shows what users of the model will see:
    classification  loss: -log of the probability given the true label (after the model's
                    temperature, if calibrated)
    multi-label     loss: binary cross-entropy of each label's probability, averaged over labels
    regression      absolute_error: |predicted score - true score|
A row is an error when the predicted label (multi-label: the predicted label set) is not the
true one; a score has no such line, so a regression run lists the largest errors, no outcome.
A sentence-pair run's rows carry their second text in `text_pair`.
"""

from collections.abc import Mapping

import numpy as np
import pandas as pd


def _ranked(wrongness: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
    """The `count` rows of `rows` with the highest wrongness; a stable sort keeps ties in the
    data's order."""
    return rows[np.argsort(-wrongness[rows], kind="stable")][:count]


def worst_examples(predictions: Mapping, label_names, per_split: int, task, correct_per_split: int = 0) -> pd.DataFrame:
    """Per split, the `per_split` worst errors, then the `correct_per_split` least confident
    correct rows (none for a task that ranks every row by its error), with the task's
    error_columns (and text_pair)."""
    names = np.asarray(label_names, dtype=object)
    frames = []
    for split, p in predictions.items():
        wrongness, is_error, columns = task.error_measure(p, names)
        everything = np.arange(len(wrongness))
        groups = (
            [("error", _ranked(wrongness, everything, per_split))]
            if is_error is None
            else [
                ("error", _ranked(wrongness, everything[is_error], per_split)),
                ("correct", _ranked(wrongness, everything[~is_error], correct_per_split)),
            ]
        )
        for outcome, chosen in groups:
            frame = pd.DataFrame(
                {
                    "split": split,
                    "outcome": outcome,
                    "rank": np.arange(1, len(chosen) + 1),
                    **{name: values[chosen] for name, values in columns.items()},
                    "text": p.texts[chosen],
                },
                columns=task.error_columns,
            )
            if p.pairs is not None:
                frame["text_pair"] = p.pairs[chosen]
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=task.error_columns)
    # Empty groups left out: pandas warns when it concatenates them (their dtypes are unknown).
    return pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.6g")
