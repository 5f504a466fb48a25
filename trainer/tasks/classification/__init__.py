"""One class per text: softmax head, sparse cross-entropy, accuracy and macro F1/recall. It has
every part (parts.py): a temperature fitted on validation, a binary model's threshold for
--target-precision/recall, cleanlab's ranking, explanations and distillation."""

from trainer.tasks.base import TextTask
from trainer.tasks.class_labels import ClassLabels
from trainer.tasks.classification import card, parts
from trainer.tasks.classification.parts import POSITIVE


class ClassificationTask(ClassLabels, TextTask):
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
    decision_output = "label_index"
    export_mark = "label_index"
    answer_outputs = ("probabilities", "label_index", "label_names")
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
        # when --target-precision/--target-recall chose one (parts.BinaryThreshold); None:
        # the most probable class, as the export decides without one.
        self.threshold = None
        self.positive_margin = None
        self.operating_point = parts.BinaryThreshold(self)
        self.calibration = parts.SoftmaxTemperature(self)
        self.label_issues = parts.ClassLabelIssues(self)
        self.explanations = parts.ChosenClass(self)
        self.distillation = parts.ClassDistillation(self)

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

    # --- a loaded export's answers: the class the export chose (label_index: a binary model's
    # threshold applied) and every class's probability
    def predicted_columns(self, outputs) -> dict:
        from trainer.inference import split_predictions

        names = split_predictions.label_names_of(outputs)
        return {
            "predicted_label": [names[int(i)] for i in outputs["label_index"]],
            **split_predictions.probability_columns(names, outputs["probabilities"]),
        }

    def served_predictions(self, outputs) -> list:
        """`[{"label": ..., "probabilities": {name: p}}]`, as trainer.predict's predicted_label."""
        from trainer.inference import split_predictions

        names = split_predictions.label_names_of(outputs)
        return [
            {"label": names[int(index)], "probabilities": split_predictions.probabilities_by_name(names, row)}
            for row, index in zip(outputs["probabilities"], outputs["label_index"])
        ]

    def agreement_decisions(self, outputs):
        """The class each row's model chose [N] (a binary model decides at its own threshold),
        or of probabilities [N, C] the most probable."""
        import numpy as np

        outputs = np.asarray(outputs)
        return outputs if outputs.ndim == 1 else outputs.argmax(axis=1)

    def agreement_value(self, outputs, labels, label_names) -> float:
        import numpy as np

        return float(np.mean(self.agreement_decisions(outputs) == np.asarray(labels)))

    # --- the report
    def title(self, labels) -> str:
        return f"{len(labels)}-class classifier"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions

        return SplitPredictions(
            texts,
            labels.astype(np.int64),
            self.calibration.probabilities(outputs, temperature),
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
        return self.calibration.outputs(exported["probabilities"], temperature)

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
