"""Whether a faster copy of a model predicts what its float32 model predicts, on the same rows.

Two figures, both on validation rows: the share of rows where the copy decides as float32 does
(the class; a multi-label model's whole set of labels; a tagger's entities are matched one by
one, as an F1 of the copy's against float32's), and the change of the task's metric in
points. A copy that fails either bar is not written: a model that is faster but wrong is no
faster path. (Regression decides no labels: its metric alone is checked.)
"""

from collections.abc import Sequence

import numpy as np

MIN_LABEL_AGREEMENT = 0.99
MAX_METRIC_CHANGE_POINTS = 0.5


def label_agreement(task, reference: np.ndarray, candidate: np.ndarray) -> float | None:
    """How much both decide alike (Task.decisions_agree of Task.agreement_decisions), or None
    for a task that decides no labels."""
    ours, theirs = task.agreement_decisions(reference), task.agreement_decisions(candidate)
    return None if ours is None else task.decisions_agree(ours, theirs)


def agreed(share: float, of: str) -> str:
    """The words of an agreement (Task.agreement_of): a share of rows, or an F1 of entities."""
    if of == "entities":
        return f"entities agree with float32 at {100 * share:.2f}% F1 on"
    if of == "vectors":
        return f"vectors agree with float32's (by cosine) for {100 * share:.2f}% of the texts of"
    return f"labels agree with float32 on {100 * share:.2f}% of"


def compare(task, reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray, label_names: Sequence[str]) -> dict:
    """The check's figures, and `passed` with `why` when it did not. `reference` and `candidate`:
    each model's values of the task's decision_output for these rows; the metric watched is the
    task's agreement_metric, the one a user reads first in metrics.json."""
    agreement = label_agreement(task, reference, candidate)
    name = task.agreement_metric
    before, after = (task.agreement_value(o, labels, label_names) for o in (reference, candidate))
    change = round(100.0 * (after - before), 9)  # 0.995 - 1.0 is not exactly -0.005 in binary
    why = []
    if agreement is not None and agreement < MIN_LABEL_AGREEMENT:
        why.append(f"{agreed(agreement, task.agreement_of)} validation rows (needs {100 * MIN_LABEL_AGREEMENT:.0f}%)")
    if abs(change) > MAX_METRIC_CHANGE_POINTS:
        why.append(f"{name} moves {change:+.2f} points (at most {MAX_METRIC_CHANGE_POINTS} allowed)")
    return {
        "rows": int(len(labels)),
        "label_agreement": agreement,
        "label_agreement_of": task.agreement_of,
        "metric": name,
        "float32_value": before,
        "value": after,
        "change_points": change,
        "passed": not why,
        "why": "; ".join(why) or None,
    }
