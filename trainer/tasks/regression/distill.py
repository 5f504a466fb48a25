"""Regression's distillation: packed targets [N, 2] (the true score, NaN for an unlabelled row;
the teacher's score), the loss over them in training-label standard deviations, as
StandardizedMSE measures, and the mean absolute error of their labelled rows."""

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.tasks.labelled_rows import LabelledRowsOnly


def pack(labels, teacher) -> np.ndarray:
    teacher = np.asarray(teacher, np.float64).reshape(len(teacher), -1)[:, 0]
    scores = np.full(len(teacher), np.nan) if labels is None else np.asarray(labels, np.float64)
    return np.column_stack([scores, teacher]).astype(np.float32)


def unpack(packed) -> np.ndarray:
    return np.asarray(packed)[:, 0].astype(np.float32)


def split(y_true):
    """(labelled [B] bool, true scores [B], 0 on unlabelled rows, teacher's scores [B]) of a
    packed batch. The NaN is replaced before any arithmetic: a NaN that tf.where drops still
    makes its gradient NaN (tensorflow/tensorflow#38349)."""
    y_true = tf.cast(y_true, tf.float32)
    labelled = tf.math.is_finite(y_true[:, 0])
    return labelled, tf.where(labelled, y_true[:, 0], 0.0), y_true[:, 1]


class DistillationMSE(tf_keras.losses.Loss):
    """Per row: alpha * ((prediction - true score) / std)^2 where the row has a score + (1 -
    alpha) * ((prediction - teacher's score) / std)^2. A score has no temperature."""

    def __init__(self, std: float, alpha: float, name="distillation_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.std, self.alpha = float(std), float(alpha)

    def call(self, y_true, y_pred):
        labelled, scores, teacher = split(y_true)
        predicted = tf.reshape(tf.cast(y_pred, tf.float32), [-1])
        hard = tf.square((predicted - scores) / self.std)
        soft = tf.square((predicted - teacher) / self.std)
        return self.alpha * tf.where(labelled, hard, 0.0) + (1.0 - self.alpha) * soft

    def get_config(self):
        return {**super().get_config(), "std": self.std, "alpha": self.alpha}


class LabelledMAE(LabelledRowsOnly, tf_keras.metrics.MeanAbsoluteError):
    """MeanAbsoluteError of the labelled rows of packed batches."""

    def labelled_rows(self, y_true, y_pred) -> tuple:
        labelled, scores, _ = split(y_true)
        # Both [B, 1]: the error is per row, whether the model's scores come as [B] or [B, 1].
        return labelled, scores[:, None], tf.reshape(y_pred, [-1, 1])
