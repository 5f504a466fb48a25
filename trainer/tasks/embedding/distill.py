"""Embeddings' distillation in Keras (the layout and its reasons: teacher.py): the variant's loss
on a packed batch's labelled rows plus the squared distance of each text's unit vector to the
teacher's, and the variant's training metric of the labelled rows."""

import tensorflow as tf
import tf_keras

from trainer.tasks.labelled_rows import LabelledRowsOnly


def split(y_true, rows, label_width: int, sides: int):
    """(labelled [B] bool, plain labels [B, L], teacher vectors [B, sides, T]) of a packed batch
    of `rows` rows (Keras may give y_true a last axis of 1)."""
    y_true = tf.reshape(tf.cast(y_true, tf.float32), [rows, -1])
    teacher = y_true[:, label_width + 1 :]
    return y_true[:, label_width] > 0.5, y_true[:, :label_width], tf.reshape(teacher, [rows, sides, -1])


class DistilledVectors(tf_keras.losses.Loss):
    """alpha * the variant's loss of the labelled rows (`inner`, an unlabelled row weighing 0 in
    it as a padding row does) + (1 - alpha) * the mean over the real rows of the squared distance
    between each text's unit vector and the teacher's (2 - 2 cosine, whatever the width). The
    teacher is read in its principal axes (`rotation`, the leading as many as the vectors given:
    the student's width, or a part's under --embedding-dims) when its width differs or `rotate`."""

    def __init__(self, inner, alpha: float, label_width: int, sides: int, rotation, rotate: bool, **kwargs):
        super().__init__(name="distilled_vectors", **kwargs)
        self.inner, self.alpha, self.label_width, self.sides = inner, float(alpha), int(label_width), int(sides)
        self.rotation, self.rotate = tf.constant(rotation, tf.float32), bool(rotate)

    def __call__(self, y_true, y_pred, sample_weight=None):
        rows = tf.shape(y_pred)[0]
        labelled, plain, teacher = split(y_true, rows, self.label_width, self.sides)
        real = tf.ones([rows], tf.bool) if sample_weight is None else tf.reshape(sample_weight, [-1]) > 0
        hard = self.inner(plain, y_pred, tf.cast(labelled & real, tf.float32))
        width = y_pred.shape[-1]
        if self.rotate or width != self.rotation.shape[0]:
            teacher = tf.einsum("bst,td->bsd", teacher, self.rotation[:, :width])
        target = tf.math.l2_normalize(teacher, axis=-1)
        student = tf.math.l2_normalize(tf.cast(y_pred[:, : self.sides], tf.float32), axis=-1)
        distance = tf.reduce_mean(tf.reduce_sum(tf.square(student - target), axis=-1), axis=1)
        weights = tf.cast(real, tf.float32)
        soft = tf.math.divide_no_nan(tf.reduce_sum(distance * weights), tf.reduce_sum(weights))
        return self.alpha * hard + (1.0 - self.alpha) * soft

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)


def on_labelled_rows(metric, label_width: int):
    """`metric` (the variant's training metric) of a packed batch's labelled rows, under its
    own name (history columns, progress lines)."""

    class Labelled(LabelledRowsOnly, type(metric)):
        def labelled_rows(self, y_true, y_pred) -> tuple:
            labelled, plain, _ = split(y_true, tf.shape(y_pred)[0], label_width, 1)
            return labelled, plain, y_pred

    return Labelled(name=metric.name)
