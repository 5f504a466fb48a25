"""One class per text: softmax head, sparse cross-entropy, accuracy and macro F1/recall; a
temperature fitted on validation; a binary model's threshold for --target-precision/recall."""

from trainer.errors import UserError
from trainer.tasks.base import ThresholdedTask
from trainer.tasks.classification import card

POSITIVE = 1  # a binary classifier's positive class id: its second label


class ClassificationTask(ThresholdedTask):
    name = "classification"
    metric_goals = {
        "val_macro_f1": "maximize",
        "val_accuracy": "maximize",
        "val_macro_recall": "maximize",
        "val_loss": "minimize",
    }
    train_metric = "accuracy"
    summary_metrics = ("accuracy", "macro_f1", "macro_recall")
    loss_name = "cross-entropy"
    calibrates = True  # a temperature rescales class probabilities
    decision_output = "label_index"
    export_mark = "label_index"
    answer_outputs = ("probabilities", "label_index", "label_names")
    explained_outputs = answer_outputs
    decision_variables = ("threshold",)
    agreement_metric = "accuracy"
    figures = ("confusion_matrices", "per_class_scores", "reliability")
    per_label_metrics = "per_class"
    error_columns = ["split", "outcome", "rank", "loss", "true_label", "predicted_label", "probability", "text"]
    errors_description = (
        "misclassified examples with the highest loss (-log of the exported model's probability of the true label)"
    )
    model_card = card.SECTIONS

    def __init__(self):
        # A binary model's threshold on its positive class's exported probability, and the
        # logit margin z1 - z0 from which it predicts class 1 at the export's temperature, set
        # when --target-precision/--target-recall chose one (choose_operating_point); None:
        # the most probable class, as the export decides without one.
        self.threshold = None
        self.positive_margin = None

    # --- labels
    def label_spec(self, frame, column, data):
        from trainer.tasks.classification import labels

        return labels.infer_labels(frame, column, data)

    def encode_labels(self, frame, column, spec, split_name):
        from trainer.tasks.classification import labels

        return labels.encode_labels(frame, column, spec, split_name)

    def check_labels(self, frame, column, labels, spec, data) -> None:
        from trainer.tasks.classification import labels as labels_lib

        labels_lib.check_classes(frame, column, labels, spec, data)

    def check_training_labels(self, frame, column, labels, spec, data, source) -> None:
        """Each class with rows, none a typo (too few rows, or a case variant of another), at
        least two."""
        import numpy as np

        from trainer.tasks.classification import labels as labels_lib

        labels_lib.check_class_sizes(frame, column, labels, spec, data.min_examples_per_class)
        self.check_labels(frame, column, labels, spec, data)
        present = np.unique(labels)
        if len(present) < 2:
            raise UserError(
                f"{source}: training data holds a single class "
                f"({spec.names[present[0]]!r}); a classifier needs at least two"
            )

    def label_counts(self, labels, spec) -> dict:
        import numpy as np

        counts = np.bincount(labels, minlength=len(spec.names))
        return {name: int(count) for name, count in zip(spec.names, counts)}

    def held_out_strata(self, labels):
        return labels

    def prepare_strata(self, labels, minimum):
        return labels

    # --- the model
    def output_units(self, labels) -> int:
        return len(labels.names)

    def loss(self):
        import tf_keras

        return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def keras_metrics(self) -> list:
        import tf_keras

        return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def summarize(self, outputs, labels, label_names) -> dict:
        import numpy as np

        from trainer.tasks.classification import metrics

        return metrics.summarize(outputs, labels.astype(np.int64), label_names, self.decide(outputs))

    def decide(self, outputs):
        """The class the export predicts for each row of logits [N, C]: so the final metrics,
        the confusion matrices and errors.csv are those of the model users get."""
        import numpy as np

        outputs = np.asarray(outputs, np.float64)
        if self.positive_margin is None:
            return outputs.argmax(axis=1)
        return (outputs[:, 1] - outputs[:, 0] >= self.positive_margin).astype(np.int64)

    def describe(self, result: dict) -> str:
        return (
            f"loss {result['loss']:.4f}  accuracy {result['accuracy']:.4f}  macro-F1 "
            f"{result['macro_f1']:.4f}  macro-recall {result['macro_recall']:.4f}"
        )

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} acc {logs['accuracy']:.3f} | val loss "
            f"{logs['val_loss']:.4f} acc {logs['val_accuracy']:.3f} macro-F1 "
            f"{logs['val_macro_f1']:.3f} macro-recall {logs['val_macro_recall']:.3f}"
        )

    # --- distillation
    def teacher_problem(self, values):
        """Each row a distribution: probabilities in [0, 1] that sum to 1 (within 0.01, a
        file's rounding)."""
        import numpy as np

        from trainer.tasks.base import first_problem, outside_probabilities

        total = np.asarray(values, np.float64).sum(axis=1)
        return first_problem(
            values,
            [
                outside_probabilities(values),
                (np.abs(total - 1) > 0.01, lambda row: f"its probabilities sum to {total[row]:g}, not 1"),
            ],
        )

    def distillation_loss(self, temperature: float, alpha: float):
        from trainer.tasks.classification import distill

        return distill.DistillationCrossEntropy(temperature, alpha)

    def distillation_metrics(self) -> list:
        from trainer.tasks.classification import distill

        return [distill.LabelledAccuracy(name="accuracy")]

    def teacher_outputs(self, teacher):
        """Log probabilities (log 0 clipped to a finite floor): their softmax is the teacher's
        distribution, so argmax and cross-entropy are the teacher's own."""
        from trainer.tasks.classification import metrics

        return metrics.logits_from_probabilities(teacher, 1.0)

    def teacher_agreement(self, teacher, outputs):
        import numpy as np

        return float(np.mean(self.decide(self.teacher_outputs(teacher)) == self.decide(outputs)))

    # --- decided on validation
    def validation_caveat(self, has_test: bool):
        """A threshold chosen for --target-precision/--target-recall reaches its target on
        validation by construction: those figures flatter the model, as multi-label's do."""
        if self.positive_margin is None:
            return None
        return "optimistic: the decision threshold was chosen on this split; " + (
            "the test split's figures are the honest ones"
            if has_test
            else "give --testing-file for figures on data the choice did not see"
        )

    def check_operating_point(self, label_names, flag: str) -> None:
        if len(label_names) != 2:
            raise UserError(
                f"{flag}: needs a binary or multi-label task; this classifier has "
                f"{len(label_names)} classes ({', '.join(label_names)}), and a threshold "
                f"picks between two"
            )

    def decision_scores(self, outputs, labels, temperature: float) -> tuple:
        """The positive class's calibrated probability, as the export computes it."""
        import numpy as np

        from trainer.tasks.classification import metrics

        probabilities = metrics.softmax(outputs, temperature)
        return probabilities[:, POSITIVE : POSITIVE + 1], (np.asarray(labels) == POSITIVE)[:, None]

    def choose_operating_point(self, point, target, value, label_names, temperature) -> dict:
        from trainer.tasks.classification import metrics

        chosen = point(0, f"positive class {label_names[POSITIVE]!r}")
        if chosen["reached"]:
            self.threshold = chosen["threshold"]
            self.positive_margin = metrics.positive_margin(chosen["threshold"], temperature)
        return {"target": target, "value": value, "positive_label": label_names[POSITIVE], **chosen}

    def kept_decision(self, column: int) -> str:
        return "deciding by the most probable class (threshold 0.5)"

    def describe_operating_point(self, point, label_names) -> str:
        return card.operating_point(point, label_names)

    def operating_curves(self, point, predictions, label_names) -> list:
        import numpy as np

        return [
            (
                point["positive_label"],
                predictions.probabilities[:, POSITIVE],
                np.asarray(predictions.labels) == POSITIVE,
                point,
            )
        ]

    # --- the export
    def export_decisions(self) -> dict:
        return {} if self.threshold is None else {"threshold": self.threshold}

    def serving_outputs(self, module, logits, batch) -> dict:
        """Probabilities softmax(logits / T), the label and its index: the most probable class,
        or with a threshold the positive class when its probability reaches it."""
        import tensorflow as tf

        probabilities = tf.nn.softmax(logits / module.temperature, axis=-1)
        predicted = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        threshold = getattr(module, "threshold", None)
        if threshold is not None:  # decided when the function is traced
            predicted = tf.cast(probabilities[:, POSITIVE] >= threshold, tf.int32)
        return {
            "probabilities": probabilities,
            "label": tf.gather(module.label_names, predicted),
            "label_index": predicted,
            "label_names": tf.tile(module.label_names[tf.newaxis, :], [batch, 1]),
        }

    def explained_output(self, module, logits, target):
        """The log-odds of class `target` at the export's temperature, log p - log(1 - p) of
        its softmax probability: its scaled logit less the log-sum-exp of the others'."""
        import numpy as np
        import tensorflow as tf

        chosen = tf.gather(logits, target, batch_dims=1)
        scaled = logits / module.temperature
        others = tf.where(tf.one_hot(target, tf.shape(logits)[1]) > 0, -np.inf, scaled)
        return chosen / module.temperature - tf.reduce_logsumexp(others, axis=1)

    # --- a loaded export's answers: the class the export chose (label_index: a binary model's
    # threshold applied) and every class's probability
    def predicted_columns(self, outputs) -> dict:
        from trainer.tasks import predictions

        names = predictions.label_names_of(outputs)
        return {
            "predicted_label": [names[int(i)] for i in outputs["label_index"]],
            **predictions.probability_columns(names, outputs["probabilities"]),
        }

    def served_predictions(self, outputs) -> list:
        """`[{"label": ..., "probabilities": {name: p}}]`, as trainer.predict's predicted_label."""
        from trainer.tasks import predictions

        names = predictions.label_names_of(outputs)
        return [
            {"label": names[int(index)], "probabilities": predictions.probabilities_by_name(names, row)}
            for row, index in zip(outputs["probabilities"], outputs["label_index"])
        ]

    def explained_choices(self, outputs) -> tuple:
        import numpy as np

        from trainer.tasks import predictions

        names = predictions.label_names_of(outputs)
        chosen = np.eye(len(names), dtype=bool)[outputs["label_index"].astype(np.int64)]
        return names, outputs["probabilities"], chosen

    def agreement_decisions(self, outputs):
        """The class each row's model chose [N] (a binary model decides at its own threshold),
        or of probabilities [N, C] the most probable."""
        import numpy as np

        outputs = np.asarray(outputs)
        return outputs if outputs.ndim == 1 else outputs.argmax(axis=1)

    def agreement_value(self, outputs, labels, label_names) -> float:
        import numpy as np

        return float(np.mean(self.agreement_decisions(outputs) == np.asarray(labels)))

    # --- label issues
    def probabilities(self, outputs):
        from trainer.tasks.classification import metrics

        return metrics.softmax(outputs)

    def rank_label_issues(self, probabilities, labels, ranking_probabilities) -> tuple:
        import numpy as np
        from cleanlab import filter as cleanlab_filter
        from cleanlab import rank as cleanlab_rank

        given = np.asarray(labels, np.int64)
        flagged = cleanlab_filter.find_label_issues(given, probabilities, n_jobs=1)
        return flagged, cleanlab_rank.get_label_quality_scores(given, ranking_probabilities)

    def label_members(self, labels, count: int):
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

    # --- the report
    def title(self, labels) -> str:
        return f"{len(labels)}-class classifier"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.tasks.classification import metrics
        from trainer.tasks.predictions import SplitPredictions

        return SplitPredictions(
            texts,
            labels.astype(np.int64),
            metrics.softmax(outputs, temperature),
            outputs.astype(np.float64),
            predicted=np.asarray(self.decide(outputs), np.int64),
            pairs=pairs,
        )

    def decide_as(self, decisions: dict, temperature: float) -> None:
        """A binary export's threshold, as the margin of the logits outputs_of_export recovers
        at its temperature."""
        from trainer.tasks.classification import metrics

        if "threshold" in decisions:
            self.threshold = float(decisions["threshold"])
            self.positive_margin = metrics.positive_margin(self.threshold, temperature)

    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        """The uncalibrated logits of its probabilities (up to a per-row constant), as the run
        scored its splits: metrics.json's loss is theirs."""
        from trainer.tasks.classification import metrics

        return metrics.logits_from_probabilities(exported["probabilities"], temperature)

    def error_measure(self, predictions, names) -> tuple:
        """loss: -log of the exported probability of the true label; an error: a predicted
        class that is not the true one."""
        import numpy as np

        p = predictions
        rows = np.arange(len(p.labels))
        true_probability = p.probabilities[rows, p.labels].astype(np.float64)
        loss = -np.log(np.maximum(true_probability, np.finfo(np.float64).tiny))
        predicted = p.probabilities.argmax(axis=1) if p.predicted is None else p.predicted
        return (
            loss,
            predicted != p.labels,
            {
                "loss": loss,
                "true_label": names[p.labels],
                "predicted_label": names[predicted],
                "probability": p.probabilities[rows, predicted].astype(np.float64),
            },
        )
