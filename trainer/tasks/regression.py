"""One number per text: a linear float32 output, MSE on standardized targets, correlations.

The network learns z = (y - mean) / std of the training labels, whatever their scale (a 0-5
similarity, a 1-10 rating); the model's last layer maps z back, so predictions, the export and
metrics are all in the label's own units while the loss sees unit-variance targets (in the
spirit of TF Model Garden's sentence-prediction regression, which trains on the raw score).
"""
import numpy as np
import tensorflow as tf
import tf_keras
from scipy import stats

from trainer.errors import UserError
from trainer.tasks.base import Task


class Destandardize(tf_keras.layers.Layer):
    """z -> z * std + mean, in float32; mean and std are part of the saved config and weights."""

    def __init__(self, mean: float, std: float, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.mean, self.std = float(mean), float(std)

    def call(self, z):
        return tf.cast(z, tf.float32) * self.std + self.mean

    def get_config(self):
        return {**super().get_config(), "mean": self.mean, "std": self.std}


class StandardizedMSE(tf_keras.losses.Loss):
    """Mean squared error measured in training-label standard deviations."""

    def __init__(self, std: float, name="standardized_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.std = float(std)

    def call(self, y_true, y_pred):
        y_pred = tf.reshape(tf.cast(y_pred, tf.float32), [-1])
        y_true = tf.reshape(tf.cast(y_true, tf.float32), [-1])
        return tf.square((y_pred - y_true) / self.std)

    def get_config(self):
        return {**super().get_config(), "std": self.std}


def correlation_metrics(predicted: np.ndarray, labels: np.ndarray) -> dict:
    """pearson, spearman, mse, mae; a correlation of a constant side is 0 (no signal), not NaN."""
    predicted, labels = np.asarray(predicted, np.float64), np.asarray(labels, np.float64)
    errors = predicted - labels
    constant = np.ptp(predicted) == 0 or np.ptp(labels) == 0
    return {
        "pearson": 0.0 if constant else float(stats.pearsonr(predicted, labels)[0]),
        "spearman": 0.0 if constant else float(stats.spearmanr(predicted, labels)[0]),
        "mse": float(np.mean(errors ** 2)),
        "mae": float(np.mean(np.abs(errors))),
    }


class RegressionTask(Task):
    name = "regression"
    train_metric = "mae"
    summary_metrics = ("spearman", "pearson", "mse", "mae")
    loss_name = "MSE of standardized scores"

    def __init__(self):
        self.mean, self.std = 0.0, 1.0

    def prepare(self, train_labels: np.ndarray) -> None:
        labels = np.asarray(train_labels, np.float64)
        self.mean, self.std = float(labels.mean()), float(labels.std())
        if not self.std > 0:
            raise UserError(f"training labels: every score is {labels[0]:g}; regression needs "
                            f"scores that vary")

    def output_units(self, labels) -> int:
        return 1

    def output_layer(self, outputs):
        return Destandardize(self.mean, self.std, name="score")(outputs)

    def loss(self):
        return StandardizedMSE(self.std)

    def keras_metrics(self) -> list:
        return [tf_keras.metrics.MeanAbsoluteError(name="mae")]

    def summarize(self, outputs, labels, label_names) -> dict:
        predicted = np.asarray(outputs, np.float64).reshape(-1)
        labels = np.asarray(labels, np.float64).reshape(-1)
        metrics = correlation_metrics(predicted, labels)
        return {"examples": int(len(labels)), "loss": metrics["mse"] / self.std ** 2, **metrics}

    def describe(self, result: dict) -> str:
        return (f"loss {result['loss']:.4f}  spearman {result['spearman']:.4f}  pearson "
                f"{result['pearson']:.4f}  mse {result['mse']:.4f}  mae {result['mae']:.4f}")

    def describe_epoch(self, logs: dict) -> str:
        return (f"loss {logs['loss']:.4f} mae {logs['mae']:.3f} | val loss {logs['val_loss']:.4f} "
                f"spearman {logs['val_spearman']:.3f} pearson {logs['val_pearson']:.3f} "
                f"mae {logs['val_mae']:.3f}")
