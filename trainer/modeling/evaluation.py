"""Classification metrics over a whole split, from the model's predictions."""
from typing import Optional, Sequence, Tuple

import numpy as np
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    return log_norm - shifted[np.arange(len(labels)), labels]


def summarize(logits: np.ndarray, labels: np.ndarray, label_names: Sequence[str],
              predicted: Optional[np.ndarray] = None) -> dict:
    """loss, accuracy, macro F1/recall, per-class precision/recall/F1/support, confusion matrix,
    of the `predicted` classes (default: the most probable)."""
    classes = list(range(len(label_names)))
    predicted = logits.argmax(axis=1) if predicted is None else np.asarray(predicted)
    precision, recall, f1, support = precision_recall_fscore_support(
        labels, predicted, labels=classes, zero_division=0)
    # Macro averages over the classes present in this split: a class with no examples here
    # has no recall to average (sklearn would count it as 0).
    present = support > 0
    return {
        "examples": int(len(labels)),
        "loss": float(softmax_cross_entropy(logits, labels).mean()),
        "accuracy": float((predicted == labels).mean()),
        "macro_f1": float(f1[present].mean()),
        "macro_recall": float(recall[present].mean()),
        "per_class": {name: {"precision": float(precision[i]), "recall": float(recall[i]),
                             "f1": float(f1[i]), "support": int(support[i])}
                      for i, name in enumerate(label_names)},
        "confusion_matrix": confusion_matrix(labels, predicted, labels=classes).tolist(),
    }


def predict_logits(model, dataset, callbacks=()) -> Tuple[np.ndarray, np.ndarray]:
    """(logits [N, C], labels [N]) of one pass over `dataset` (features, labels, weights), in
    row order when the features number the rows; weight-0 rows are padding and dropped. Class
    ids come back as int64, regression targets (and a regression model's outputs in place of
    logits) as floats."""
    out = model.predict(dataset, verbose=0, callbacks=list(callbacks))
    keep = out["weight"] > 0
    order = np.argsort(out["row"][keep], kind="stable") if "row" in out else slice(None)
    labels = out["label"][keep][order]
    return out["logits"][keep][order], labels if labels.dtype.kind == "f" else labels.astype(np.int64)


def evaluate(model, dataset, label_names: Sequence[str]) -> dict:
    """summarize() over one pass of the model over `dataset`."""
    return summarize(*predict_logits(model, dataset), label_names)
