"""Classification's numbers: a split's metrics (softmax and its cross-entropy: parts/temperature.py), the logit margin
of a binary threshold, and the uncalibrated logits of an export's probabilities."""

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from trainer.tasks.parts.temperature import softmax_cross_entropy

# The smallest normal float32: a probability that underflowed to 0 is read as this, for a
# finite log.
TINY = float(np.finfo(np.float32).tiny)


def summarize(
    logits: np.ndarray, labels: np.ndarray, label_names: Sequence[str], predicted: np.ndarray | None = None
) -> dict:
    """loss, accuracy, macro F1/recall, per-class precision/recall/F1/support, confusion matrix,
    of the `predicted` classes (default: the most probable)."""
    classes = list(range(len(label_names)))
    predicted = logits.argmax(axis=1) if predicted is None else np.asarray(predicted)
    precision, recall, f1, support = precision_recall_fscore_support(labels, predicted, labels=classes, zero_division=0)
    # Macro averages over the classes present in this split: a class with no examples here
    # has no recall to average (sklearn would count it as 0).
    present = support > 0
    return {
        "examples": int(len(labels)),
        "loss": float(softmax_cross_entropy(logits, labels).mean()),
        "accuracy": float((predicted == labels).mean()),
        "macro_f1": float(f1[present].mean()),
        "macro_recall": float(recall[present].mean()),
        "per_class": {
            name: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, name in enumerate(label_names)
        },
        "confusion_matrix": confusion_matrix(labels, predicted, labels=classes).tolist(),
    }


def positive_margin(threshold: float, temperature: float) -> float:
    """The logit margin z1 - z0 at which the exported probability softmax(z / T)[1] reaches
    `threshold`: T * log(t / (1 - t)); t is kept inside float32's open interval (0, 1)."""
    eps = float(np.finfo(np.float32).eps)
    t = min(max(threshold, eps), 1 - eps)
    return temperature * float(np.log(t / (1 - t)))


def logits_from_probabilities(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """A classifier's export returns probabilities softmax(z / T) with its own temperature T (1
    unless the run calibrated it). The report needs the uncalibrated ones too, and recovers them
    as softmax(T * log p): T * log p = z - T * logsumexp(z / T) differs from the logits z by a
    per-row constant, which softmax ignores. That keeps the serving signature (and every client
    of it) unchanged, and works for models exported before calibration existed."""
    return temperature * np.log(np.maximum(np.asarray(probabilities, np.float64), TINY))
