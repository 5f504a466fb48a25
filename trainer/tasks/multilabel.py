"""Any number of labels per text: one sigmoid output per label, binary cross-entropy, and a
decision threshold per label chosen on the validation set after training (saved in the model).

Each epoch is scored at threshold 0.5 (the thresholds are not fitted yet); the final metrics of
every split use the thresholds chosen on validation.
"""
import difflib

import numpy as np
from sklearn.metrics import precision_recall_fscore_support

from trainer.errors import UserError
from trainer.tasks.base import Task

# Candidate thresholds per label; ties go to the one closest to 0.5.
CANDIDATES = np.round(np.arange(0.05, 0.951, 0.05), 2)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))


def binary_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean over labels and rows, computed stably from logits."""
    x, z = np.asarray(logits, np.float64), np.asarray(labels, np.float64)
    return float(np.mean(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))))


def multilabel_metrics(predicted: np.ndarray, labels: np.ndarray, names) -> dict:
    """micro/macro F1, subset accuracy and per-label precision/recall/F1/support of 0/1 matrices."""
    predicted, labels = predicted.astype(int), labels.astype(int)
    precision, recall, f1, support = precision_recall_fscore_support(
        labels, predicted, average=None, zero_division=0)
    micro = precision_recall_fscore_support(labels, predicted, average="micro", zero_division=0)[2]
    present = support > 0  # as in classification: a label absent from the split has no F1
    return {
        "micro_f1": float(micro),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "subset_accuracy": float(np.mean(np.all(predicted == labels, axis=1))),
        "per_label": {name: {"precision": float(precision[j]), "recall": float(recall[j]),
                             "f1": float(f1[j]), "support": int(support[j])}
                      for j, name in enumerate(names)},
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
    raise UserError(f"{source}: label {names[j]!r}{at}, column {column or names[j]!r}: on {len(rows)} "
                    f"of {len(targets)} training rows, fewer than --min-examples-per-class "
                    f"{minimum}.{hint} Fix the labels, add examples, or lower the flag to keep so "
                    f"rare a label")


class MultiLabelTask(Task):
    name = "multi-label"
    train_metric = "label_accuracy"
    summary_metrics = ("micro_f1", "macro_f1", "subset_accuracy")
    loss_name = "binary cross-entropy"

    def __init__(self):
        self.thresholds = None  # per label; 0.5 until fitted on validation

    def output_units(self, labels) -> int:
        return len(labels.names)

    def loss(self):
        import tf_keras
        return tf_keras.losses.BinaryCrossentropy(from_logits=True)

    def keras_metrics(self) -> list:
        import tf_keras
        # On logits, threshold 0 is probability 0.5.
        return [tf_keras.metrics.BinaryAccuracy(name="label_accuracy", threshold=0.0)]

    def fit_on_validation(self, logits: np.ndarray, labels: np.ndarray) -> None:
        self.thresholds = choose_thresholds(sigmoid(logits), labels)

    def validation_caveat(self, has_test: bool):
        """The thresholds maximize each label's F1 on validation, so validation's F1 is the best
        these outputs can score there: optimistic. Test never saw the tuning (issue #23)."""
        return ("optimistic: each label's threshold was tuned on this split; "
                + ("the test split's figures are the honest ones" if has_test else
                   "give --testing-file for figures on data the tuning did not see"))

    def summarize(self, outputs, labels, label_names) -> dict:
        probabilities = sigmoid(outputs)
        thresholds = self.thresholds if self.thresholds is not None else np.full(len(label_names), 0.5)
        result = {"examples": int(len(labels)), "loss": binary_cross_entropy(outputs, labels),
                  **multilabel_metrics(probabilities >= thresholds, labels, label_names)}
        result["thresholds"] = {name: float(t) for name, t in zip(label_names, thresholds)}
        return result

    def describe(self, result: dict) -> str:
        return (f"loss {result['loss']:.4f}  micro-F1 {result['micro_f1']:.4f}  macro-F1 "
                f"{result['macro_f1']:.4f}  subset accuracy {result['subset_accuracy']:.4f}")

    def describe_epoch(self, logs: dict) -> str:
        return (f"loss {logs['loss']:.4f} label acc {logs['label_accuracy']:.3f} | val loss "
                f"{logs['val_loss']:.4f} micro-F1 {logs['val_micro_f1']:.3f} macro-F1 "
                f"{logs['val_macro_f1']:.3f} subset acc {logs['val_subset_accuracy']:.3f}")
