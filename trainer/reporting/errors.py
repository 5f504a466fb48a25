"""errors.csv: the validation and test examples the model gets wrong, worst first; then, if
asked (--report-correct), the least confident ones it gets right, the `outcome` column saying
which is which. A list of the highest-loss rows alone would, for a model that errs on few rows,
fill up with correct predictions at 0.999 (issue #23).

How wrong is measured on the exported model's own outputs, so the list shows what users of the
model will see:
    classification  loss: -log of the probability given the true label (after the model's
                    temperature, if calibrated)
    multi-label     loss: binary cross-entropy of each label's probability, averaged over labels
    regression      absolute_error: |predicted score - true score|
A row is an error when the predicted label (multi-label: the predicted label set) is not the
true one; a score has no such line, so a regression run lists the largest errors, no outcome.
A sentence-pair run's rows carry their second text in `text_pair`.
"""
from typing import Mapping

import numpy as np
import pandas as pd

from trainer.reporting.predictions import SplitPredictions

COLUMNS = ["split", "outcome", "rank", "loss", "true_label", "predicted_label", "probability", "text"]
COLUMNS_BY_TASK = {
    "classification": COLUMNS,
    "multi-label": ["split", "outcome", "rank", "loss", "true_labels", "predicted_labels", "text"],
    "regression": ["split", "rank", "absolute_error", "true_score", "predicted_score", "text"],
}
DESCRIPTIONS = {
    "classification": "misclassified examples with the highest loss (-log of the exported model's "
                      "probability of the true label)",
    "multi-label": "examples with a wrong label set and the highest loss (binary cross-entropy of "
                   "the exported model's label probabilities, averaged over the labels)",
    "regression": "examples with the largest absolute error (|predicted - true score|)",
}
# Probabilities are float32: one that rounded to 0 or 1 still gets a finite loss.
_EPSILON = float(np.finfo(np.float32).eps) / 2


def _classification(p: SplitPredictions, names: np.ndarray):
    """(how wrong each row is, whether it is an error, {column: value per row}) of a
    classifier's split."""
    rows = np.arange(len(p.labels))
    true_probability = p.probabilities[rows, p.labels].astype(np.float64)
    loss = -np.log(np.maximum(true_probability, np.finfo(np.float64).tiny))
    predicted = p.probabilities.argmax(axis=1) if p.predicted is None else p.predicted
    return loss, predicted != p.labels, {"loss": loss, "true_label": names[p.labels], "predicted_label": names[predicted],
                  "probability": p.probabilities[rows, predicted].astype(np.float64)}


def _joined(matrix: np.ndarray, names: np.ndarray) -> np.ndarray:
    return np.array(["|".join(names[np.flatnonzero(row)]) for row in matrix], dtype=object)


def _multilabel(p: SplitPredictions, names: np.ndarray):
    probabilities = np.clip(p.probabilities.astype(np.float64), _EPSILON, 1 - _EPSILON)
    labels = p.labels.astype(np.float64)
    loss = -np.mean(labels * np.log(probabilities) + (1 - labels) * np.log1p(-probabilities), axis=1)
    wrong = np.any(p.predicted.astype(bool) != p.labels.astype(bool), axis=1)
    return loss, wrong, {"loss": loss, "true_labels": _joined(p.labels, names),
                  "predicted_labels": _joined(p.predicted, names)}


def _regression(p: SplitPredictions, names: np.ndarray):
    error = np.abs(p.scores.astype(np.float64) - p.labels)
    return error, None, {"absolute_error": error, "true_score": p.labels.astype(np.float64),
                   "predicted_score": p.scores.astype(np.float64)}


_MEASURES = {"classification": _classification, "multi-label": _multilabel, "regression": _regression}


def _ranked(wrongness: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
    """The `count` rows of `rows` with the highest wrongness; a stable sort keeps ties in the
    data's order."""
    return rows[np.argsort(-wrongness[rows], kind="stable")][:count]


def worst_examples(predictions: Mapping[str, SplitPredictions], label_names, per_split: int,
                   task: str = "classification", correct_per_split: int = 0) -> pd.DataFrame:
    """Per split, the `per_split` worst errors, then the `correct_per_split` least confident
    correct rows (none for regression: every row is ranked by its error), with
    COLUMNS_BY_TASK[task] (and text_pair)."""
    names = np.asarray(label_names, dtype=object)
    frames = []
    for split, p in predictions.items():
        wrongness, is_error, columns = _MEASURES[task](p, names)
        everything = np.arange(len(wrongness))
        groups = ([("error", _ranked(wrongness, everything, per_split))] if is_error is None else
                  [("error", _ranked(wrongness, everything[is_error], per_split)),
                   ("correct", _ranked(wrongness, everything[~is_error], correct_per_split))])
        for outcome, chosen in groups:
            frame = pd.DataFrame({"split": split, "outcome": outcome,
                                  "rank": np.arange(1, len(chosen) + 1),
                                  **{name: values[chosen] for name, values in columns.items()},
                                  "text": p.texts[chosen]}, columns=COLUMNS_BY_TASK[task])
            if p.pairs is not None:
                frame["text_pair"] = p.pairs[chosen]
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=COLUMNS_BY_TASK[task])
    # Empty groups left out: pandas warns when it concatenates them (their dtypes are unknown).
    return pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.6g")
