"""Any number of labels per text: one sigmoid output per label, binary cross-entropy, and a
decision threshold per label chosen on the validation set after training (saved in the model).

Each epoch is scored at threshold 0.5 (the thresholds are not fitted yet); the final metrics of
every split use the thresholds chosen on validation.
"""

from trainer.tasks.base import TextTask
from trainer.tasks.multilabel import card, parts


class MultiLabelTask(TextTask):
    name = "multi-label"
    metric_goals = {
        "val_micro_f1": "maximize",
        "val_macro_f1": "maximize",
        "val_subset_accuracy": "maximize",
        "val_loss": "minimize",
    }
    train_metric = "label_accuracy"
    summary_metrics = ("micro_f1", "macro_f1", "subset_accuracy")
    loss_name = "binary cross-entropy"
    label_noun = "label"
    decision_output = "predicted"
    export_mark = "labels"
    answer_outputs = ("probabilities", "labels", "predicted", "label_names")
    decision_variables = ("thresholds",)
    agreement_metric = "micro_f1"
    figures = ("per_label_scores",)
    per_label_metrics = "per_label"
    error_columns = ["split", "outcome", "rank", "loss", "true_labels", "predicted_labels", "text"]
    errors_description = (
        "examples with a wrong label set and the highest loss (binary cross-entropy of "
        "the exported model's label probabilities, averaged over the labels)"
    )
    model_card = card.SECTIONS

    def __init__(self):
        self.thresholds = None  # per label; 0.5 until fitted on validation
        self.separator = "|"  # the training data's: the export joins a row's labels with it
        self.label_count = None  # the training data's labels (prepare): what tells packed labels
        self.operating_point = parts.LabelThresholds(self)
        self.label_issues = parts.LabelSetIssues(self)
        self.explanations = parts.ChosenLabels(self)
        self.distillation = parts.LabelDistillation(self)

    def check_flags(self, config, require) -> None:
        d = config.data
        require(d.label_type == "auto", "--label-type", "has no meaning with --task multi-label")
        require(
            config.train.class_weights == "none",
            "--class-weights",
            "'balanced' weighs one class per row; --task multi-label has several",
        )
        require(
            not (d.label_columns and d.label_names),
            "--label-names",
            "cannot be combined with --label-columns (the columns name the labels)",
        )
        require(bool(d.label_separator), "--label-separator", "must not be empty")
        self.check_loss(config, require)

    # --- labels
    def label_columns(self, first, data) -> tuple:
        """--label-columns: each label its own 0/1 column; else one column of label names."""
        if data.label_columns:
            return data.label_columns, [c.strip() for c in data.label_columns.split(",") if c.strip()]
        return super().label_columns(first, data)

    def label_spec(self, frame, column, data):
        from trainer.tasks.multilabel import labels

        return labels.infer_multi_labels(frame, column, data)

    def encode_labels(self, frame, column, spec, split_name):
        from trainer.tasks.multilabel import labels

        return labels.encode_multi_labels(frame, column, spec)

    def check_training_labels(self, frame, column, labels, spec, data, source) -> None:
        from trainer.tasks.multilabel import labels as labels_lib

        labels_lib.check_label_sizes(
            frame, None if spec.kind == "columns" else column, labels, spec.names, data.min_examples_per_class
        )

    def label_counts(self, labels, spec) -> dict:
        """{label: rows carrying it}."""
        return {name: int(count) for name, count in zip(spec.names, labels.sum(axis=0))}

    def prepare_strata(self, labels, minimum):
        from trainer.tasks.multilabel import labels as labels_lib

        return labels_lib.rarest_labels(labels, minimum)

    # --- the model
    def prepare(self, spec, train_labels) -> None:
        self.separator = spec.separator
        self.label_count = len(spec.names)

    def output_units(self, labels) -> int:
        return len(labels.names)

    def loss(self):
        import tf_keras

        return tf_keras.losses.BinaryCrossentropy(from_logits=True)

    def keras_metrics(self) -> list:
        import tf_keras

        # On logits, threshold 0 is probability 0.5.
        return [tf_keras.metrics.BinaryAccuracy(name="label_accuracy", threshold=0.0)]

    def summarize(self, outputs, labels, label_names) -> dict:
        import numpy as np

        from trainer.tasks.multilabel import metrics

        thresholds = self.thresholds if self.thresholds is not None else np.full(len(label_names), 0.5)
        result = {
            "examples": int(len(labels)),
            "loss": metrics.binary_cross_entropy(outputs, labels),
            **metrics.multilabel_metrics(self.decide(outputs), labels, label_names),
        }
        result["thresholds"] = {name: float(t) for name, t in zip(label_names, thresholds)}
        return result

    def decide(self, outputs):
        """[N, L] bool: the labels given to each row of logits, at the thresholds fitted on
        validation (0.5 before), as the export decides."""
        import numpy as np

        from trainer.tasks.multilabel import metrics

        return metrics.sigmoid(outputs) >= (0.5 if self.thresholds is None else np.asarray(self.thresholds))

    def describe(self, result: dict) -> str:
        return (
            f"loss {result['loss']:.4f}  micro-F1 {result['micro_f1']:.4f}  macro-F1 "
            f"{result['macro_f1']:.4f}  subset accuracy {result['subset_accuracy']:.4f}"
        )

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} label acc {logs['label_accuracy']:.3f} | val loss "
            f"{logs['val_loss']:.4f} micro-F1 {logs['val_micro_f1']:.3f} macro-F1 "
            f"{logs['val_macro_f1']:.3f} subset acc {logs['val_subset_accuracy']:.3f}"
        )

    # --- decided on validation
    def fit_on_validation(self, logits, labels) -> None:
        from trainer.tasks.multilabel import metrics

        self.thresholds = metrics.choose_thresholds(metrics.sigmoid(logits), labels)

    def validation_caveat(self, has_test: bool):
        """The thresholds maximize each label's F1 on validation, so validation's F1 is the best
        these outputs can score there: optimistic. Test never saw the tuning (issue #23)."""
        return "optimistic: each label's threshold was tuned on this split; " + (
            "the test split's figures are the honest ones"
            if has_test
            else "give --testing-file for figures on data the tuning did not see"
        )

    # --- the export
    def export_decisions(self) -> dict:
        return {} if self.thresholds is None else {"thresholds": [float(t) for t in self.thresholds]}

    def joined_outputs(self) -> dict:
        return {"labels": ("predicted", self.separator)}

    def serving_outputs(self, module, logits, batch) -> dict:
        """Per-label probabilities, and the labels at or above their threshold joined by the
        training data's separator."""
        import tensorflow as tf

        probabilities = tf.sigmoid(logits)
        chosen = probabilities >= module.thresholds
        names = tf.tile(module.label_names[tf.newaxis, :], [batch, 1])
        return {
            "probabilities": probabilities,
            "labels": tf.strings.reduce_join(tf.ragged.boolean_mask(names, chosen), axis=1, separator=self.separator),
            "predicted": tf.cast(chosen, tf.int32),
            "label_names": names,
        }

    # --- a loaded export's answers: the labels at or above their thresholds (`labels` joined,
    # `predicted` 0/1 per label) and every label's probability
    def predicted_columns(self, outputs) -> dict:
        from trainer.inference import split_predictions

        return {
            "predicted_labels": [labels.decode("utf-8") for labels in outputs["labels"]],
            **split_predictions.probability_columns(
                split_predictions.label_names_of(outputs), outputs["probabilities"]
            ),
        }

    def served_predictions(self, outputs) -> list:
        """`[{"labels": [...], "probabilities": {name: p}}]`, as trainer.predict's
        predicted_labels."""
        from trainer.inference import split_predictions

        names = split_predictions.label_names_of(outputs)
        return [
            {
                "labels": [name for name, picked in zip(names, row_chosen) if picked],
                "probabilities": split_predictions.probabilities_by_name(names, row),
            }
            for row, row_chosen in zip(outputs["probabilities"], outputs["predicted"])
        ]

    def agreement_decisions(self, outputs):
        """The whole 0/1 row of chosen labels."""
        import numpy as np

        return np.asarray(outputs, np.int64)

    def agreement_value(self, outputs, labels, label_names) -> float:
        import numpy as np

        from trainer.tasks.multilabel import metrics

        return metrics.multilabel_metrics(np.asarray(outputs, bool), np.asarray(labels), label_names)["micro_f1"]

    # --- the report
    def title(self, labels) -> str:
        return f"{len(labels)}-label multi-label classifier"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions
        from trainer.tasks.multilabel import metrics

        probabilities = metrics.sigmoid(outputs)
        return SplitPredictions(
            texts,
            labels.astype(np.int64),
            probabilities,
            None,
            predicted=(probabilities >= np.asarray(self.thresholds)).astype(np.int32),
            pairs=pairs,
        )

    def decide_as(self, decisions: dict, temperature: float) -> None:
        """The export's threshold per label."""
        if "thresholds" in decisions:
            self.thresholds = [float(t) for t in decisions["thresholds"]]

    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        """Each label's logit, of its probability."""
        from trainer.tasks.multilabel import metrics

        return metrics.logits_of(exported["probabilities"])

    def error_measure(self, predictions, names) -> tuple:
        """loss: binary cross-entropy of each label's exported probability, averaged over the
        labels; an error: a predicted label set that is not the true one."""
        import numpy as np

        from trainer.tasks.multilabel.metrics import EPSILON

        p = predictions
        probabilities = np.clip(p.probabilities.astype(np.float64), EPSILON, 1 - EPSILON)
        labels = p.labels.astype(np.float64)
        loss = -np.mean(labels * np.log(probabilities) + (1 - labels) * np.log1p(-probabilities), axis=1)
        wrong = np.any(p.predicted.astype(bool) != p.labels.astype(bool), axis=1)

        def joined(matrix):
            return np.array(["|".join(names[np.flatnonzero(row)]) for row in matrix], dtype=object)

        return loss, wrong, {"loss": loss, "true_labels": joined(p.labels), "predicted_labels": joined(p.predicted)}
