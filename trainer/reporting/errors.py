"""errors.csv: the validation and test examples the model gets most wrong, worst first.

How wrong is measured on the exported model's own outputs, so the list shows what users of the
model will see:
    classification  loss: -log of the probability given the true label (after the model's
                    temperature, if calibrated)
    multi-label     loss: binary cross-entropy of each label's probability, averaged over labels
    regression      absolute_error: |predicted score - true score|
A sentence-pair run's rows carry their second text in `text_pair`.
"""
from typing import Mapping

import numpy as np
import pandas as pd

from trainer.reporting.predictions import SplitPredictions

COLUMNS = ["split", "rank", "loss", "true_label", "predicted_label", "probability", "text"]
COLUMNS_BY_TASK = {
    "classification": COLUMNS,
    "multi-label": ["split", "rank", "loss", "true_labels", "predicted_labels", "text"],
    "regression": ["split", "rank", "absolute_error", "true_score", "predicted_score", "text"],
}
DESCRIPTIONS = {
    "classification": "highest-loss examples (-log of the exported model's probability of the true label)",
    "multi-label": "highest-loss examples (binary cross-entropy of the exported model's label "
                   "probabilities, averaged over the labels)",
    "regression": "examples with the largest absolute error (|predicted - true score|)",
}
# Probabilities are float32: one that rounded to 0 or 1 still gets a finite loss.
_EPSILON = float(np.finfo(np.float32).eps) / 2


def _classification(p: SplitPredictions, names: np.ndarray):
    """(how wrong each row is, {column: value per row}) of a classifier's split."""
    rows = np.arange(len(p.labels))
    true_probability = p.probabilities[rows, p.labels].astype(np.float64)
    loss = -np.log(np.maximum(true_probability, np.finfo(np.float64).tiny))
    predicted = p.probabilities.argmax(axis=1)
    return loss, {"loss": loss, "true_label": names[p.labels], "predicted_label": names[predicted],
                  "probability": p.probabilities[rows, predicted].astype(np.float64)}


def _joined(matrix: np.ndarray, names: np.ndarray) -> np.ndarray:
    return np.array(["|".join(names[np.flatnonzero(row)]) for row in matrix], dtype=object)


def _multilabel(p: SplitPredictions, names: np.ndarray):
    probabilities = np.clip(p.probabilities.astype(np.float64), _EPSILON, 1 - _EPSILON)
    labels = p.labels.astype(np.float64)
    loss = -np.mean(labels * np.log(probabilities) + (1 - labels) * np.log1p(-probabilities), axis=1)
    return loss, {"loss": loss, "true_labels": _joined(p.labels, names),
                  "predicted_labels": _joined(p.predicted, names)}


def _regression(p: SplitPredictions, names: np.ndarray):
    error = np.abs(p.scores.astype(np.float64) - p.labels)
    return error, {"absolute_error": error, "true_score": p.labels.astype(np.float64),
                   "predicted_score": p.scores.astype(np.float64)}


_MEASURES = {"classification": _classification, "multi-label": _multilabel, "regression": _regression}


def worst_examples(predictions: Mapping[str, SplitPredictions], label_names, per_split: int,
                   task: str = "classification") -> pd.DataFrame:
    """The `per_split` worst rows of each split, with COLUMNS_BY_TASK[task] (and text_pair)."""
    names = np.asarray(label_names, dtype=object)
    frames = []
    for split, p in predictions.items():
        wrongness, columns = _MEASURES[task](p, names)
        # Stable sort on -wrongness: ties keep the data's order.
        worst = np.argsort(-wrongness, kind="stable")[:per_split]
        frame = pd.DataFrame({"split": split, "rank": np.arange(1, len(worst) + 1),
                              **{name: values[worst] for name, values in columns.items()},
                              "text": p.texts[worst]}, columns=COLUMNS_BY_TASK[task])
        if p.pairs is not None:
            frame["text_pair"] = p.pairs[worst]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS_BY_TASK[task])


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.6g")
