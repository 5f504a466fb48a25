"""Classification's distillation: packed targets [N, 1 + C] (the class id as a float, -1 for an
unlabelled row, then the teacher's probabilities), the loss of Hinton et al. 2015 ("Distilling
the Knowledge in a Neural Network") over them, and accuracy of their labelled rows."""

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.tasks.classification.metrics import TINY
from trainer.tasks.labelled_rows import LabelledRowsOnly

UNLABELLED = -1.0  # column 0 of a row without a class


def pack(labels, teacher) -> np.ndarray:
    """[N, 1 + C]: each row's class (or UNLABELLED) and its teacher probabilities, renormalised
    to sum to exactly 1 (a file's are rounded)."""
    teacher = np.asarray(teacher, np.float64)
    classes = np.full(len(teacher), UNLABELLED) if labels is None else np.asarray(labels, np.float64)
    return np.column_stack([classes, teacher / teacher.sum(axis=1, keepdims=True)]).astype(np.float32)


def unpack(packed) -> np.ndarray:
    return np.asarray(packed)[:, 0].astype(np.int32)


def split(y_true):
    """(labelled [B] bool, class ids [B] int32, 0 on unlabelled rows, teacher [B, C]) of a
    packed batch."""
    y_true = tf.cast(y_true, tf.float32)
    labelled = y_true[:, 0] >= 0
    return labelled, tf.cast(tf.maximum(y_true[:, 0], 0.0), tf.int32), y_true[:, 1:]


def softened_kl(teacher, logits, temperature: float):
    """KL(teacher at T || student at T) over the last axis: the teacher's probabilities and the
    student's logits each softened by T (the teacher's as softmax(log p / T)); also the tagger's,
    word by word (tasks/tagging/distill.py)."""
    teacher_log = tf.nn.log_softmax(tf.math.log(tf.maximum(teacher, TINY)) / temperature, axis=-1)
    student_log = tf.nn.log_softmax(logits / temperature, axis=-1)
    return tf.reduce_sum(tf.exp(teacher_log) * (teacher_log - student_log), axis=-1)


class DistillationCrossEntropy(tf_keras.losses.Loss):
    """Per row: alpha * cross-entropy of its true class (rows with one) + (1 - alpha) * T^2 *
    KL(teacher at T || student at T), the teacher at T being softmax(log p / T). T^2 keeps the
    soft term's gradients the size of the hard one's whatever T (Hinton et al. 2015, 2); an
    unlabelled row has the soft term alone, not rescaled."""

    def __init__(self, temperature: float, alpha: float, name="distillation_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.temperature, self.alpha = float(temperature), float(alpha)

    def call(self, y_true, y_pred):
        labelled, classes, teacher = split(y_true)
        logits = tf.cast(y_pred, tf.float32)
        hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=classes, logits=logits)
        t = self.temperature
        kl = softened_kl(teacher, logits, t)
        return self.alpha * tf.where(labelled, hard, 0.0) + (1.0 - self.alpha) * t * t * kl

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature, "alpha": self.alpha}


class LabelledAccuracy(LabelledRowsOnly, tf_keras.metrics.SparseCategoricalAccuracy):
    """SparseCategoricalAccuracy of the labelled rows of packed batches."""

    def labelled_rows(self, y_true, y_pred) -> tuple:
        labelled, classes, _ = split(y_true)
        return labelled, classes, y_pred
