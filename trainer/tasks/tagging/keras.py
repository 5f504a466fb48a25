"""Token classification's Keras pieces: the loss and the accuracy over the tokens that carry a
word's tag (its first piece: tasks/tagging/tokens.py).

Every other token (a word's later pieces, special tokens, padding, words cut by
--max-seq-length) has tag id -1 and weighs nothing, as Hugging Face's run_ner gives them the
label -100 that its cross-entropy ignores.
"""

import tensorflow as tf
import tf_keras

from trainer.tasks.tagging.tags import UNTAGGED


class TagLoss(tf_keras.losses.Loss):
    """Per sentence: the mean cross-entropy of its tagged words (tag id >= 0); a sentence
    without one costs 0."""

    def __init__(self, name="tag_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, tag_ids, logits):
        tag_ids = tf.cast(tag_ids, tf.int32)
        tagged = tf.cast(tag_ids != UNTAGGED, tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(tag_ids, 0), logits)
        return tf.reduce_sum(losses * tagged, axis=-1) / tf.maximum(tf.reduce_sum(tagged, axis=-1), 1.0)


class TagAccuracy(tf_keras.metrics.Mean):
    """The share of tagged words (tag id >= 0: not UNTAGGED, nor a distilled run's unlabelled
    word) whose most probable tag is theirs."""

    def update_state(self, tag_ids, logits, sample_weight=None):
        tag_ids = tf.cast(tag_ids, tf.int32)
        tagged = tag_ids >= 0
        right = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tag_ids), tf.float32)
        return super().update_state(tf.boolean_mask(right, tagged))
