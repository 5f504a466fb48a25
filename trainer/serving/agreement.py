"""Whether a faster copy of a model predicts what its float32 model predicts, on the same rows.

Two figures, both on validation rows: the share of rows where the copy decides as float32 does
(the class; a multi-label model's whole set of labels), and the change of the task's metric in
points. A copy that fails either bar is not written: a model that is faster but wrong is no
faster path. (Regression decides no labels: its metric alone is checked.)
"""
from typing import Optional, Sequence

import numpy as np

MIN_LABEL_AGREEMENT = 0.99
MAX_METRIC_CHANGE_POINTS = 0.5
# The metric each task's check watches: the one a user reads first in metrics.json.
METRICS = {"classification": "accuracy", "multi-label": "micro_f1", "regression": "spearman"}


def decisions(task: str, outputs: np.ndarray) -> Optional[np.ndarray]:
    """What a user acts on, per row: the class index; the 0/1 row of chosen labels; none for
    regression. `outputs`: the class each row's model chose [N] (a binary model decides at its
    own threshold) or probabilities [N, C] (the most probable class); chosen labels [N, L];
    scores [N]."""
    if task == "classification":
        outputs = np.asarray(outputs)
        return outputs if outputs.ndim == 1 else outputs.argmax(axis=1)
    if task == "multi-label":
        return np.asarray(outputs, np.int64)
    return None


def metric(task: str, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]) -> float:
    if task == "classification":
        return float(np.mean(decisions(task, outputs) == np.asarray(labels)))
    if task == "multi-label":
        from trainer.tasks.multilabel import multilabel_metrics
        return multilabel_metrics(np.asarray(outputs, bool), np.asarray(labels), label_names)["micro_f1"]
    from trainer.tasks.regression import correlation_metrics
    return correlation_metrics(np.asarray(outputs).reshape(-1), labels)["spearman"]


def label_agreement(task: str, reference: np.ndarray, candidate: np.ndarray) -> Optional[float]:
    ours, theirs = decisions(task, reference), decisions(task, candidate)
    if ours is None:
        return None
    same = ours == theirs
    return float(np.mean(same if same.ndim == 1 else same.all(axis=1)))


def compare(task: str, reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray,
            label_names: Sequence[str]) -> dict:
    """The check's figures, and `passed` with `why` when it did not."""
    agreement = label_agreement(task, reference, candidate)
    name = METRICS[task]
    before, after = (metric(task, o, labels, label_names) for o in (reference, candidate))
    change = round(100.0 * (after - before), 9)  # 0.995 - 1.0 is not exactly -0.005 in binary
    why = []
    if agreement is not None and agreement < MIN_LABEL_AGREEMENT:
        why.append(f"labels agree with float32 on {100 * agreement:.2f}% of validation rows "
                   f"(needs {100 * MIN_LABEL_AGREEMENT:.0f}%)")
    if abs(change) > MAX_METRIC_CHANGE_POINTS:
        why.append(f"{name} moves {change:+.2f} points (at most {MAX_METRIC_CHANGE_POINTS} allowed)")
    return {"rows": int(len(labels)), "label_agreement": agreement, "metric": name,
            "float32_value": before, "value": after, "change_points": change,
            "passed": not why, "why": "; ".join(why) or None}
