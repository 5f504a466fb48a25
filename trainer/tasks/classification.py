"""One class per text: softmax head, sparse cross-entropy, accuracy and macro F1/recall."""
import numpy as np

from trainer.tasks.base import Task


class ClassificationTask(Task):
    name = "classification"
    train_metric = "accuracy"
    summary_metrics = ("accuracy", "macro_f1", "macro_recall")
    loss_name = "cross-entropy"
    # A binary model's logit margin z1 - z0 from which it predicts class 1, set when
    # --target-precision/--target-recall chose a threshold (training.operating_point); None:
    # the most probable class, as the export decides without one.
    positive_margin = None

    def output_units(self, labels) -> int:
        return len(labels.names)

    def validation_caveat(self, has_test: bool):
        """A threshold chosen for --target-precision/--target-recall reaches its target on
        validation by construction: those figures flatter the model, as multi-label's do."""
        if self.positive_margin is None:
            return None
        return ("optimistic: the decision threshold was chosen on this split; "
                + ("the test split's figures are the honest ones" if has_test else
                   "give --testing-file for figures on data the choice did not see"))

    def loss(self):
        import tf_keras
        return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def keras_metrics(self) -> list:
        import tf_keras
        return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def summarize(self, outputs, labels, label_names) -> dict:
        from trainer.modeling import evaluation
        return evaluation.summarize(outputs, labels.astype(np.int64), label_names, self.decide(outputs))

    def decide(self, outputs) -> np.ndarray:
        """The class the export predicts for each row of logits [N, C]: so the final metrics,
        the confusion matrices and errors.csv are those of the model users get."""
        outputs = np.asarray(outputs, np.float64)
        if self.positive_margin is None:
            return outputs.argmax(axis=1)
        return (outputs[:, 1] - outputs[:, 0] >= self.positive_margin).astype(np.int64)

    def describe(self, result: dict) -> str:
        return (f"loss {result['loss']:.4f}  accuracy {result['accuracy']:.4f}  macro-F1 "
                f"{result['macro_f1']:.4f}  macro-recall {result['macro_recall']:.4f}")

    def describe_epoch(self, logs: dict) -> str:
        return (f"loss {logs['loss']:.4f} acc {logs['accuracy']:.3f} | val loss "
                f"{logs['val_loss']:.4f} acc {logs['val_accuracy']:.3f} macro-F1 "
                f"{logs['val_macro_f1']:.3f} macro-recall {logs['val_macro_recall']:.3f}")
