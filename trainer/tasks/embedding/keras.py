"""Embeddings' Keras pieces: the CoSENT loss of scored pairs and the share of their pairs a batch
orders right, over the bi-encoder's [B, sides, H] vectors (model.py)."""

import tensorflow as tf
import tf_keras

# CoSENT's scale: cosine differences are multiplied by it before the exponential, as
# sentence-transformers' CoSENTLoss (scale=20.0) and the method's author (Su 2022) do.
SCALE = 20.0


def pair_cosines(vectors):
    """[B, sides, H] -> the cosine of each row's first two sides, float32 [B]."""
    vectors = tf.math.l2_normalize(tf.cast(vectors, tf.float32), axis=-1)
    return tf.reduce_sum(vectors[:, 0] * vectors[:, 1], axis=-1)


def ordered_pairs(scores, sample_weight=None):
    """[B, B] bool: (i, j) where row i's score is above row j's, both rows real (weight > 0)."""
    scores = tf.reshape(tf.cast(scores, tf.float32), [-1])
    above = scores[:, tf.newaxis] > scores[tf.newaxis, :]
    if sample_weight is None:
        return above
    real = tf.reshape(sample_weight, [-1]) > 0
    return above & real[:, tf.newaxis] & real[tf.newaxis, :]


class CoSENTLoss(tf_keras.losses.Loss):
    """log(1 + sum over pairs (i, j) with score_i > score_j of exp(SCALE * (cos_j - cos_i))):
    only the order of the scores matters (any range), and every pair of rows in the batch counts
    (Su 2022; sentence-transformers' CoSENTLoss). One value per batch: weight-0 rows (static
    shapes' padding) take no part in it."""

    def __init__(self, scale: float = SCALE, name="cosent", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def __call__(self, y_true, y_pred, sample_weight=None):
        cosines = pair_cosines(y_pred) * self.scale
        differences = cosines[tf.newaxis, :] - cosines[:, tf.newaxis]  # [i, j]: cos_j - cos_i
        kept = tf.where(ordered_pairs(y_true, sample_weight), differences, -1e12)
        return tf.reduce_logsumexp(tf.concat([[0.0], tf.reshape(kept, [-1])], axis=0))

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


class PairOrder(tf_keras.metrics.Metric):
    """The share of the pairs of rows (i, j), score_i > score_j within a batch, whose cosines
    are ordered alike: what CoSENT trains, logged while training."""

    def __init__(self, name="pair_order", **kwargs):
        super().__init__(name=name, **kwargs)
        self.right = self.add_weight(name="right", initializer="zeros")
        self.pairs = self.add_weight(name="pairs", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        cosines = pair_cosines(y_pred)
        ordered = ordered_pairs(y_true, sample_weight)
        right = ordered & (cosines[:, tf.newaxis] > cosines[tf.newaxis, :])
        self.right.assign_add(tf.reduce_sum(tf.cast(right, tf.float32)))
        self.pairs.assign_add(tf.reduce_sum(tf.cast(ordered, tf.float32)))

    def result(self):
        return tf.math.divide_no_nan(self.right, self.pairs)

    def reset_state(self):
        self.right.assign(0.0)
        self.pairs.assign(0.0)
