"""--long-texts windows in the model: a row of k windows is split into k encoder inputs, and
the k window vectors are pooled into the text's one vector, so one head and one loss see the
whole text at training exactly as at prediction.

A row arrives k * seq_length tokens wide (trainer.data.input_pipeline.pack_tokens and encode lay a
text's packed windows side by side, each padded to seq_length), or narrower than one window
when every text of the batch fits in one: the batch is then one window of its own width.
"""

import tensorflow as tf
import tf_keras

POOLINGS = ("mean", "max", "attention")


def window_count(width, seq_length: int):
    """Windows in a batch `width` tokens wide: whole windows, or one narrower than seq_length."""
    return tf.maximum(width // seq_length, 1)


class SplitWindows(tf_keras.layers.Layer):
    """{name: [B, T]} -> {name: [B * k, T / k]}: k = T // seq_length windows (one if T is
    shorter). Every window of every text goes through the encoder as a row of its own."""

    def __init__(self, seq_length: int, **kwargs):
        super().__init__(**kwargs)
        self.seq_length = seq_length

    def call(self, features):
        width = tf.shape(features["input_mask"])[1]
        windows = window_count(width, self.seq_length)
        return {name: tf.reshape(t, [-1, width // windows]) for name, t in features.items()}

    def get_config(self):
        return {**super().get_config(), "seq_length": self.seq_length}


class WindowPooling(tf_keras.layers.Layer):
    """Window vectors [B * k, H] -> text vectors [B, H], over each text's real windows (those
    with a token; the empty ones padding a shorter text are left out), in float32:
    - mean: their average;
    - max: their element-wise maximum;
    - attention: their sum weighted by a softmax of a learned score per window (Dense(1)).
    """

    def __init__(self, pooling: str, seq_length: int, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"unknown window pooling {pooling!r}")
        self.pooling, self.seq_length = pooling, seq_length
        self.score = tf_keras.layers.Dense(1, dtype="float32", name="window_score") if pooling == "attention" else None

    def call(self, vectors, input_mask):
        batch = tf.shape(input_mask)[0]
        windows = window_count(tf.shape(input_mask)[1], self.seq_length)
        vectors = tf.reshape(tf.cast(vectors, tf.float32), [batch, windows, vectors.shape[-1]])
        real = tf.reduce_any(tf.reshape(input_mask, [batch, windows, -1]) > 0, axis=2)
        if self.pooling == "max":
            lowest = tf.fill(tf.shape(vectors), vectors.dtype.min)
            pooled = tf.reduce_max(tf.where(real[:, :, tf.newaxis], vectors, lowest), axis=1)
            # A row of no real window (an all-padding row): zeros, as the mean gives it.
            return tf.where(tf.reduce_any(real, axis=1, keepdims=True), pooled, 0.0)
        if self.pooling == "mean":
            weights = tf.cast(real, tf.float32)
        else:
            scores = tf.squeeze(self.score(vectors), -1)
            weights = tf.nn.softmax(tf.where(real, scores, -1e9), axis=1) * tf.cast(real, tf.float32)
        total = tf.reduce_sum(vectors * weights[:, :, tf.newaxis], axis=1)
        return total / tf.maximum(tf.reduce_sum(weights, axis=1, keepdims=True), 1e-9)

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "seq_length": self.seq_length}
