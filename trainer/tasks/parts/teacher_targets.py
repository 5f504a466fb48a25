"""The distillation part (trainer.tasks.parts, issue #51): a teacher's outputs as targets.

A distilled run's training labels are "packed": one float32 row per text holding its true label
(or the kind's "no label" marker, for an unlabelled text) and the teacher's outputs (a tagger's:
per word, then per token), so the token cache, batching and tf.distribute carry them as they
carry plain labels. Only the Keras loss and metrics see packed batches (Task.compiled_with);
validation and test labels stay plain. The layout is the kind's own, in its distill module
(trainer/tasks/<kind>/distill.py), imported when first used as the kinds import their TensorFlow
code.
"""

import abc


class Distillation(abc.ABC):
    def __init__(self, task):
        self.task = task  # the kind distilled into (its prepared scale, its label count)

    def columns(self, label_names) -> list:
        """The columns of a teacher file holding its outputs, in label order: trainer.predict's
        (serving/predict_file.py), so a teacher run's predictions are a teacher file as they are.
        By default one probability column per class or label."""
        return [f"probability_{name}" for name in label_names]

    def problem(self, values) -> tuple | None:
        """(index of the first bad row, what is wrong with it in words) of the teacher's values
        (float64 [N, K] from columns), or None. A non-finite value is bad for every kind; kinds
        whose teacher gives probabilities add their own checks (first_problem). The caller names
        the file and its row."""
        return first_problem(values)

    def module(self):
        """The kind's distill module (its packing, loss and metric)."""
        import importlib

        return importlib.import_module(f"{type(self.task).__module__}.distill")

    def pack(self, labels, teacher):
        """float32 [N, ...] packed targets of a split's plain `labels` (None: N unlabelled rows)
        and the teacher's values [N, K] as read: the layout is the kind's (its distill.pack),
        read back only by its own loss, metrics and unpack."""
        return self.module().pack(labels, teacher)

    def is_packed(self, labels) -> bool:
        """Whether `labels` are packed targets rather than the kind's plain labels (by default:
        plain labels are one value per row)."""
        return labels.ndim == 2

    def unpack(self, packed):
        """The plain labels of packed targets, exactly as the kind encodes them (dtype and
        shape); only for rows that all have one."""
        return self.module().unpack(packed)

    @abc.abstractmethod
    def loss(self, temperature: float, alpha: float):
        """The Keras loss over packed targets: alpha of the kind's loss against the true label
        (on the rows that have one) plus 1 - alpha of its loss against the teacher's outputs.
        Per-row values, reduced by Keras (so tf.distribute scales it as the plain loss)."""

    @abc.abstractmethod
    def metrics(self) -> list:
        """The kind's Keras metric, under its own name (history columns, progress lines), of
        the labelled rows of packed batches alone: an unlabelled row has no truth to score."""

    @abc.abstractmethod
    def outputs(self, teacher):
        """The teacher's values [N, K] as the model's head would output them, so the kind's
        summarize scores the teacher exactly as it scores the student."""

    @abc.abstractmethod
    def agreement(self, teacher, outputs) -> float | None:
        """The share of rows where the teacher (its values [N, K]) and the model (its outputs)
        decide alike, both decided as the model's decisions are (metrics.json's distillation
        `agreement`); None for a kind that decides nothing."""


def first_problem(values, checks=()) -> tuple | None:
    """Distillation.problem's answer: (the first row of `values` [N, K] that is not finite or
    that one of `checks` flags, its reason), or None. `checks` are (bad rows [N] bool,
    reason(row) -> str), tried in order after finiteness (a comparison with NaN flags nothing)."""
    import numpy as np

    values = np.asarray(values, np.float64)
    finite = np.isfinite(values)
    checks = [(~finite.all(axis=1), lambda row: f"{values[row][~finite[row]][0]:g} is not a finite number"), *checks]
    bad = np.logical_or.reduce([rows for rows, _ in checks])
    if not bad.any():
        return None
    row = int(np.argmax(bad))
    return row, next(reason(row) for rows, reason in checks if rows[row])


def outside_probabilities(values) -> tuple:
    """first_problem's check of values that must each be a probability, in [0, 1]."""
    import numpy as np

    values = np.asarray(values, np.float64)
    outside = (values < 0) | (values > 1)
    return outside.any(axis=1), lambda row: f"{values[row][outside[row]][0]:g} is not a probability (outside [0, 1])"
