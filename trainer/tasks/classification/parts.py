"""Classification's parts (trainer.tasks.parts): every one. A binary model's threshold for
--target-precision/--target-recall, a softmax temperature, cleanlab's ranking of class labels,
the chosen class's log-odds explained, and Hinton et al.'s distillation (distill.py)."""

from trainer.tasks.classification import card
from trainer.tasks.parts import attribution, label_quality, refusal, teacher_targets, temperature, threshold
from trainer.tasks.parts.temperature import softmax

POSITIVE = 1  # a binary classifier's positive class id: its second label


class BinaryThreshold(threshold.OperatingPoint):
    """A binary model's threshold on its positive class's calibrated probability; the chosen one
    is the task's (threshold, positive_margin), which its decisions and export read."""

    def check(self, label_names, flag: str) -> None:
        from trainer.errors import UserError

        if len(label_names) != 2:
            why = (
                f"this classifier has {len(label_names)} classes ({', '.join(label_names)}), "
                f"and a threshold picks between two"
            )
            raise UserError(refusal(self.task, "operating_point", flag, why))

    def decision_scores(self, outputs, labels, temperature: float) -> tuple:
        """The positive class's calibrated probability, as the export computes it."""
        import numpy as np

        probabilities = softmax(outputs, temperature)
        return probabilities[:, POSITIVE : POSITIVE + 1], (np.asarray(labels) == POSITIVE)[:, None]

    def choose(self, point, target, value, label_names, temperature) -> dict:
        from trainer.tasks.classification import metrics

        chosen = point(0, f"positive class {label_names[POSITIVE]!r}")
        if chosen["reached"]:
            self.task.threshold = chosen["threshold"]
            self.task.positive_margin = metrics.positive_margin(chosen["threshold"], temperature)
        return {"target": target, "value": value, "positive_label": label_names[POSITIVE], **chosen}

    def kept_decision(self, column: int) -> str:
        return "deciding by the most probable class (threshold 0.5)"

    def describe(self, point, label_names) -> str:
        return card.operating_point(point, label_names)

    def curves(self, point, predictions, label_names) -> list:
        import numpy as np

        return [
            (
                point["positive_label"],
                predictions.probabilities[:, POSITIVE],
                np.asarray(predictions.labels) == POSITIVE,
                point,
            )
        ]


class SoftmaxTemperature(temperature.Calibration):
    """softmax(logits / T): the class probabilities the export returns."""

    def probabilities(self, outputs, temperature: float = 1.0):

        return softmax(outputs, temperature)

    def outputs(self, probabilities, temperature: float):
        """The uncalibrated logits of `probabilities` (up to a per-row constant)."""
        from trainer.tasks.classification import metrics

        return metrics.logits_from_probabilities(probabilities, temperature)


class ClassLabelIssues(label_quality.LabelIssues):
    """cleanlab's classification ranking of one class id per row."""

    def probabilities(self, outputs):

        return softmax(outputs)

    def rank(self, probabilities, labels, ranking_probabilities) -> tuple:
        import numpy as np
        from cleanlab import filter as cleanlab_filter
        from cleanlab import rank as cleanlab_rank

        given = np.asarray(labels, np.int64)
        flagged = cleanlab_filter.find_label_issues(given, probabilities, n_jobs=1)
        return flagged, cleanlab_rank.get_label_quality_scores(given, ranking_probabilities)

    def members(self, labels, count: int):
        import numpy as np

        return np.eye(count, dtype=bool)[labels]

    def chance_accuracies(self, probabilities, labels) -> tuple:
        import numpy as np

        labels = np.asarray(labels, np.int64)
        return (float(np.mean(probabilities.argmax(axis=1) == labels)), float(np.bincount(labels).max() / len(labels)))

    def label_texts(self, labels, spec) -> list:
        import numpy as np

        return list(np.asarray(spec.names, dtype=object)[np.asarray(labels, np.int64)])

    def suggested_labels(self, probabilities, spec) -> list:
        import numpy as np

        names = np.asarray(spec.names, dtype=object)
        return list(names[probabilities.argmax(axis=1)]) if len(probabilities) else []


class ChosenClass(attribution.Choices):
    """The class the export chose (label_index: a binary model's threshold applied)."""

    outputs = ("probabilities", "label_index", "label_names")

    def output(self, module, logits, target):
        """The log-odds of class `target` at the export's temperature, log p - log(1 - p) of
        its softmax probability: its scaled logit less the log-sum-exp of the others'."""
        import numpy as np
        import tensorflow as tf

        chosen = tf.gather(logits, target, batch_dims=1)
        scaled = logits / module.temperature
        others = tf.where(tf.one_hot(target, tf.shape(logits)[1]) > 0, -np.inf, scaled)
        return chosen / module.temperature - tf.reduce_logsumexp(others, axis=1)

    def choices(self, outputs) -> tuple:
        import numpy as np

        from trainer.inference import split_predictions

        names = split_predictions.label_names_of(outputs)
        chosen = np.eye(len(names), dtype=bool)[outputs["label_index"].astype(np.int64)]
        return names, outputs["probabilities"], chosen


class ClassDistillation(teacher_targets.Distillation):
    """A teacher's class probabilities, softened by the distillation temperature."""

    def problem(self, values):
        """Each row a distribution: probabilities in [0, 1] that sum to 1 (within 0.01, a
        file's rounding)."""
        import numpy as np

        total = np.asarray(values, np.float64).sum(axis=1)
        return teacher_targets.first_problem(
            values,
            [
                teacher_targets.outside_probabilities(values),
                (np.abs(total - 1) > 0.01, lambda row: f"its probabilities sum to {total[row]:g}, not 1"),
            ],
        )

    def loss(self, temperature: float, alpha: float):
        from trainer.tasks.classification import distill

        return distill.DistillationCrossEntropy(temperature, alpha)

    def metrics(self) -> list:
        from trainer.tasks.classification import distill

        return [distill.LabelledAccuracy(name="accuracy")]

    def outputs(self, teacher):
        """Log probabilities (log 0 clipped to a finite floor): their softmax is the teacher's
        distribution, so argmax and cross-entropy are the teacher's own."""
        from trainer.tasks.classification import metrics

        return metrics.logits_from_probabilities(teacher, 1.0)

    def agreement(self, teacher, outputs):
        import numpy as np

        return float(np.mean(self.task.decide(self.outputs(teacher)) == self.task.decide(outputs)))
