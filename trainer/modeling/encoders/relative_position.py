"""MPNet's relative-position attention bias: T5's bucketed relative positions, one learned
scalar per (bucket, head), shared by every layer and added to the attention logits.

The buckets follow Hugging Face's MPNetEncoder.relative_position_bucket (itself T5's, made
bidirectional): half the buckets for keys before the query, half after; within each half,
exact distances below a quarter of the buckets, then logarithmic bins up to `max_distance`.
"""

import math

import tensorflow as tf
import tf_keras


def relative_position_buckets(length, num_buckets: int = 32, max_distance: int = 128):
    """int32 [T, T]: the bucket of key position k relative to query position q (k - q)."""
    positions = tf.range(length)
    relative = positions[None, :] - positions[:, None]
    n = -relative
    half = num_buckets // 2
    bucket = tf.cast(n < 0, tf.int32) * half
    n = tf.abs(n)
    max_exact = half // 2
    # log(n / max_exact) is only read where n >= max_exact; the maximum keeps it finite elsewhere.
    scaled = tf.math.log(tf.cast(tf.maximum(n, max_exact), tf.float32) / max_exact)
    large = max_exact + tf.cast(scaled / math.log(max_distance / max_exact) * (half - max_exact), tf.int32)
    return bucket + tf.where(n < max_exact, n, tf.minimum(large, half - 1))


class RelativePositionBias(tf_keras.layers.Layer):
    """hidden states [B, T, H] -> the bias [1, heads, T, T] their attention adds to its logits."""

    def __init__(self, num_buckets: int, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        self.num_buckets = num_buckets
        self.num_heads = num_heads

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            "embeddings",
            shape=[self.num_buckets, self.num_heads],
            initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
        )
        super().build(input_shape)

    def call(self, hidden):
        buckets = relative_position_buckets(tf.shape(hidden)[1], self.num_buckets)
        values = tf.gather(tf.cast(self.embeddings, self.compute_dtype), buckets)  # [T, T, N]
        return tf.expand_dims(tf.transpose(values, [2, 0, 1]), 0)

    def get_config(self):
        return {**super().get_config(), "num_buckets": self.num_buckets, "num_heads": self.num_heads}
