"""Multi-label's parts (trainer.tasks.parts): a threshold per label for --target-precision/
--target-recall, cleanlab's multi-label ranking, each chosen label's logit explained, and the
teacher's label probabilities as targets (distill.py). No calibration: each label has its own
sigmoid, and a softmax temperature rescales a distribution over classes."""

from trainer.tasks.multilabel import card
from trainer.tasks.parts import attribution, label_quality, teacher_targets, threshold


class LabelThresholds(threshold.OperatingPoint):
    """A threshold per label, on its probability; the chosen ones replace the task's
    F1-chosen thresholds (fit_on_validation)."""

    def decision_scores(self, outputs, labels, temperature: float) -> tuple:
        """Each label's probability, as the export computes it."""
        import numpy as np

        from trainer.tasks.multilabel import metrics

        return metrics.sigmoid(outputs), np.asarray(labels) > 0.5

    def choose(self, point, target, value, label_names, temperature) -> dict:
        """A threshold per label; a label whose target is out of reach keeps its F1-chosen one."""
        points = {name: point(j, f"label {name!r}") for j, name in enumerate(label_names)}
        for j, name in enumerate(label_names):
            if points[name]["reached"]:
                self.task.thresholds[j] = points[name]["threshold"]
        return {"target": target, "value": value, "labels": points}

    def kept_decision(self, column: int) -> str:
        return f"its F1-chosen threshold {self.task.thresholds[column]:.2f}"

    def describe(self, point, label_names) -> str:
        return card.operating_point(point, label_names)

    def curves(self, point, predictions, label_names) -> list:
        """One curve per label."""
        import numpy as np

        truth = np.asarray(predictions.labels) > 0.5
        return [
            (name, predictions.probabilities[:, j], truth[:, j], point["labels"][name])
            for j, name in enumerate(label_names)
        ]


class LabelSetIssues(label_quality.LabelIssues):
    """cleanlab.multilabel_classification's ranking of each row's set of labels."""

    def probabilities(self, outputs):
        from trainer.tasks.multilabel import metrics

        return metrics.sigmoid(outputs)

    def rank(self, probabilities, labels, ranking_probabilities) -> tuple:
        import numpy as np
        from cleanlab.multilabel_classification import filter as multilabel_filter
        from cleanlab.multilabel_classification import rank as multilabel_rank

        given = [list(np.flatnonzero(row)) for row in np.asarray(labels) > 0.5]
        flagged = multilabel_filter.find_label_issues(labels=given, pred_probs=probabilities, n_jobs=1)
        return flagged, multilabel_rank.get_label_quality_scores(given, ranking_probabilities)

    def members(self, labels, count: int):
        return labels > 0.5

    def chance_accuracies(self, probabilities, labels) -> tuple:
        """Every (row, label) decision at 0.5, against each label's more common answer."""
        import numpy as np

        given = labels > 0.5
        rate = given.mean(axis=0)
        return float(np.mean((probabilities >= 0.5) == given)), float(np.mean(np.maximum(rate, 1 - rate)))

    def label_texts(self, labels, spec) -> list:
        import numpy as np

        names = np.asarray(spec.names, dtype=object)
        return [spec.separator.join(names[np.flatnonzero(row > 0.5)]) for row in np.asarray(labels)]

    def suggested_labels(self, probabilities, spec) -> list:
        import numpy as np

        names = np.asarray(spec.names, dtype=object)
        thresholds = np.asarray(self.task.thresholds)
        return [spec.separator.join(names[np.flatnonzero(row)]) for row in probabilities >= thresholds]


class ChosenLabels(attribution.Choices):
    """The labels the export chose (`predicted`, at their thresholds)."""

    outputs = ("probabilities", "labels", "predicted", "label_names")

    def output(self, module, logits, target):
        """Label `target`'s logit: the log-odds of its own sigmoid probability."""
        import tensorflow as tf

        return tf.gather(logits, target, batch_dims=1)

    def choices(self, outputs) -> tuple:
        from trainer.inference import split_predictions

        return split_predictions.label_names_of(outputs), outputs["probabilities"], outputs["predicted"]


class LabelDistillation(teacher_targets.Distillation):
    """A teacher's probability per label, each its own binary target."""

    def problem(self, values):
        """Each value a label's probability, in [0, 1] (a row's need not sum to anything)."""
        return teacher_targets.first_problem(values, [teacher_targets.outside_probabilities(values)])

    def is_packed(self, labels) -> bool:
        """Plain labels are [N, L], packed ones [N, 2L]: told apart by the task's L (prepare).
        Before prepare no label is packed: the teacher stage packs them after it."""
        count = self.task.label_count
        return count is not None and labels.ndim == 2 and labels.shape[1] == 2 * count

    def loss(self, temperature: float, alpha: float):
        """`temperature` is not used (see DistillationBinaryCrossEntropy)."""
        from trainer.tasks.multilabel import distill

        return distill.DistillationBinaryCrossEntropy(alpha)

    def metrics(self) -> list:
        from trainer.tasks.multilabel import distill

        return [distill.LabelledLabelAccuracy(name="label_accuracy", threshold=0.0)]

    def outputs(self, teacher):
        """Logits log(p / (1 - p)), 0 and 1 kept finite: their sigmoid is the teacher's
        probabilities, decided at the task's thresholds as the student's are."""
        from trainer.tasks.multilabel import metrics

        return metrics.logits_of(teacher)

    def agreement(self, teacher, outputs):
        """The share of rows given the same whole set of labels."""
        import numpy as np

        same = self.task.decide(self.outputs(teacher)) == self.task.decide(outputs)
        return float(np.mean(same.all(axis=1)))
