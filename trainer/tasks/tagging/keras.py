"""Token classification's Keras pieces: a tag's logits read at each word's first piece, and the
loss over the words that have a tag.

Padding words and words cut by --max-seq-length have position -1 (modeling.encoders.word_pieces)
and tag id -1: they are read from position 0 and weigh nothing in the loss, as Hugging Face's
run_ner gives them the label -100 that its cross-entropy ignores.
"""
import tensorflow as tf
import tf_keras

IGNORED = -1


class WordLogits(tf_keras.layers.Layer):
    """(sequence_output [B, S, H], word_positions [B, W] int) -> float32 logits [B, W, tags]."""

    def __init__(self, tags: int, **kwargs):
        super().__init__(**kwargs)
        self.tags = tags
        self.dense = tf_keras.layers.Dense(tags, dtype="float32", name="tags")

    def call(self, sequence_output, word_positions):
        first_pieces = tf.gather(sequence_output, tf.maximum(word_positions, 0), batch_dims=1)
        return self.dense(tf.cast(first_pieces, tf.float32))

    def get_config(self):
        return {**super().get_config(), "tags": self.tags}


class TagLoss(tf_keras.losses.Loss):
    """Per sentence: the mean cross-entropy of its tagged words (tag id >= 0); a sentence
    without one costs 0."""

    def __init__(self, name="tag_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, tag_ids, logits):
        tag_ids = tf.cast(tag_ids, tf.int32)
        tagged = tf.cast(tag_ids != IGNORED, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(tag_ids, 0), logits)
        return tf.reduce_sum(losses * tagged, axis=-1) / tf.maximum(tf.reduce_sum(tagged, axis=-1), 1.0)


class TagAccuracy(tf_keras.metrics.Mean):
    """The share of tagged words (tag id >= 0) whose most probable tag is theirs."""

    def update_state(self, tag_ids, logits, sample_weight=None):
        tag_ids = tf.cast(tag_ids, tf.int32)
        tagged = tag_ids != IGNORED
        right = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tag_ids), tf.float32)
        return super().update_state(tf.boolean_mask(right, tagged))
