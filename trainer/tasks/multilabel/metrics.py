"""Multi-label's numbers: sigmoid and binary cross-entropy of logits, micro/macro F1 and subset
accuracy, and the per-label thresholds chosen on validation.

Each epoch is scored at threshold 0.5 (the thresholds are not fitted yet); the final metrics of
every split use the thresholds chosen on validation.
"""

import numpy as np
from sklearn.metrics import precision_recall_fscore_support

# A probability is float32: one that rounded to 0 or 1 is kept this far inside (0, 1), for a
# finite loss (errors.csv) and logit (a teacher's).
EPSILON = 2.0**-24  # float32's machine epsilon / 2
# Candidate thresholds per label; ties go to the one closest to 0.5.
CANDIDATES = np.round(np.arange(0.05, 0.951, 0.05), 2)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))


def logits_of(probabilities: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)): the logits whose sigmoid is `probabilities` (kept EPSILON inside (0, 1))."""
    p = np.clip(np.asarray(probabilities, np.float64), EPSILON, 1 - EPSILON)
    return np.log(p / (1 - p))


def binary_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean over labels and rows, computed stably from logits."""
    x, z = np.asarray(logits, np.float64), np.asarray(labels, np.float64)
    return float(np.mean(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))))


def multilabel_metrics(predicted: np.ndarray, labels: np.ndarray, names) -> dict:
    """micro/macro F1, subset accuracy and per-label precision/recall/F1/support of 0/1 matrices."""
    predicted, labels = predicted.astype(int), labels.astype(int)
    precision, recall, f1, support = precision_recall_fscore_support(labels, predicted, average=None, zero_division=0)
    micro = precision_recall_fscore_support(labels, predicted, average="micro", zero_division=0)[2]
    present = support > 0  # as in classification: a label absent from the split has no F1
    return {
        "micro_f1": float(micro),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "subset_accuracy": float(np.mean(np.all(predicted == labels, axis=1))),
        "per_label": {
            name: {
                "precision": float(precision[j]),
                "recall": float(recall[j]),
                "f1": float(f1[j]),
                "support": int(support[j]),
            }
            for j, name in enumerate(names)
        },
    }


def choose_thresholds(probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per label, the candidate threshold with the best F1 on these (validation) rows."""
    chosen = np.full(labels.shape[1], 0.5)
    order = np.argsort(np.abs(CANDIDATES - 0.5), kind="stable")  # 0.5 first among ties
    for j in range(labels.shape[1]):
        truth = labels[:, j] > 0.5
        scores = [_f1(probabilities[:, j] >= t, truth) for t in CANDIDATES[order]]
        chosen[j] = CANDIDATES[order][int(np.argmax(scores))]
    return chosen


def _f1(predicted: np.ndarray, truth: np.ndarray) -> float:
    true_positive = np.sum(predicted & truth)
    denominator = np.sum(predicted) + np.sum(truth)
    return 2.0 * true_positive / denominator if denominator else 0.0
