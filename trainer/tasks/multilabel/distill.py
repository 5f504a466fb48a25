"""Multi-label's distillation: packed targets [N, 2L] (the true 0/1 per label, -1 in all L for an
unlabelled row; then the teacher's probability per label), the loss over them, and the label
accuracy of their labelled rows."""

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.tasks.labelled_rows import LabelledRowsOnly

UNLABELLED = -1.0  # each of the first L columns of a row without labels


def pack(labels, teacher) -> np.ndarray:
    teacher = np.asarray(teacher, np.float64)
    truth = np.full(teacher.shape, UNLABELLED) if labels is None else np.asarray(labels, np.float64)
    return np.concatenate([truth, teacher], axis=1).astype(np.float32)


def unpack(packed) -> np.ndarray:
    packed = np.asarray(packed)
    return packed[:, : packed.shape[1] // 2].astype(np.float32)


def split(y_true):
    """(labelled [B] bool, true 0/1 [B, L], 0 on unlabelled rows, teacher's [B, L]) of a
    packed batch."""
    y_true = tf.cast(y_true, tf.float32)
    width = tf.shape(y_true)[1] // 2
    truth = y_true[:, :width]
    labelled = truth[:, 0] >= 0
    return labelled, tf.where(labelled[:, None], truth, 0.0), y_true[:, width:]


def mean_cross_entropy(targets, logits):
    """Binary cross-entropy per row [B], averaged over its labels."""
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), axis=-1)


class DistillationBinaryCrossEntropy(tf_keras.losses.Loss):
    """Per row: alpha * binary cross-entropy of the true labels where the row has them + (1 -
    alpha) * binary cross-entropy of the teacher's probabilities, each from the logits and
    averaged over the labels as BinaryCrossentropy is. No temperature: each label is its own
    yes/no whose teacher probability is already a soft target (softening it would only pull
    every label towards 0.5)."""

    def __init__(self, alpha: float, name="distillation_binary_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha = float(alpha)

    def call(self, y_true, y_pred):
        labelled, truth, teacher = split(y_true)
        logits = tf.cast(y_pred, tf.float32)
        hard, soft = mean_cross_entropy(truth, logits), mean_cross_entropy(teacher, logits)
        return self.alpha * tf.where(labelled, hard, 0.0) + (1.0 - self.alpha) * soft

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


class LabelledLabelAccuracy(LabelledRowsOnly, tf_keras.metrics.BinaryAccuracy):
    """BinaryAccuracy (on logits: threshold 0, probability 0.5) of the labelled rows of packed
    batches."""

    def labelled_rows(self, y_true, y_pred) -> tuple:
        labelled, truth, _ = split(y_true)
        return labelled, truth, y_pred
