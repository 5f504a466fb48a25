"""The bi-encoder (Reimers and Gurevych 2019, Sentence-BERT): each text of a row goes through the
same sentence encoder alone, and the model returns their vectors side by side, [B, sides, H],
for a loss of their similarities (keras.py). Its sentence encoder, modeling.heads.
build_sentence_encoder's, is what the export serves: one text in, its vector out.

A row arrives as its texts packed each alone, one after another, each its side's number as its
type id (data.input_pipeline.LongTexts.sides), so batching, bucketing and the token cache take it
as any other row; SplitSides lays the sides out again as rows of their own.
"""

import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.layers import INPUT_KEYS
from trainer.modeling.heads import Classifier

ENCODER = "sentence_encoder"  # the layer of the bi-encoder the export serves


class SplitSides(tf_keras.layers.Layer):
    """{name: [B, T]}, each row its sides' tokens one after another (type id = side) ->
    {name: [B * sides, W]}: row b's side s at b * sides + s, padded to the batch's longest side,
    every type id 0 (each side is a text of its own). With windows (`seq_length`), a side
    longer than one window is padded to whole windows, as modeling.windows reads a row."""

    def __init__(self, sides: int, seq_length: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.sides, self.seq_length = sides, seq_length

    def call(self, features):
        real = features["input_mask"] > 0
        sides = [
            tf.ragged.boolean_mask(features["input_word_ids"], real & (features["input_type_ids"] == side))
            for side in range(self.sides)
        ]
        width = tf.reduce_max(tf.stack([side.bounding_shape(axis=1) for side in sides]))
        if self.seq_length:
            whole = -(-width // self.seq_length) * self.seq_length
            width = tf.where(width > self.seq_length, whole, width)
        padded = lambda ragged: tf.reshape(  # noqa: E731  [B, sides, width] -> [B * sides, width]
            tf.stack([_padded(side, width) for side in ragged], axis=1), [-1, width]
        )
        word_ids = padded(sides)
        return {
            "input_word_ids": word_ids,
            "input_mask": padded([tf.ones_like(side) for side in sides]),
            "input_type_ids": tf.zeros_like(word_ids),
        }

    def get_config(self):
        return {**super().get_config(), "sides": self.sides, "seq_length": self.seq_length}


def _padded(ragged, width):
    """[B, (n)] -> [B, width], zeros after each row's values."""
    dense = ragged.to_tensor(0)
    return tf.pad(dense, [[0, 0], [0, width - tf.shape(dense, out_type=tf.int64)[1]]])


class JoinSides(tf_keras.layers.Layer):
    """Vectors [B * sides, H] -> [B, sides, H], in float32."""

    def __init__(self, sides: int, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.sides = sides

    def call(self, vectors):
        return tf.reshape(tf.cast(vectors, tf.float32), [-1, self.sides, vectors.shape[-1]])

    def get_config(self):
        return {**super().get_config(), "sides": self.sides}


def build_bi_encoder(sentence_encoder: tf_keras.Model, sides: int, seq_length: int | None = None) -> Classifier:
    """The model a run trains: `sentence_encoder` (named ENCODER) over each side of a row;
    `seq_length` with windows (the sentence encoder splits each side into them)."""
    inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name) for name in INPUT_KEYS}
    vectors = sentence_encoder(SplitSides(sides, seq_length, name="split_sides")(inputs))
    return Classifier(inputs=inputs, outputs=JoinSides(sides, name="join_sides")(vectors), name="bi_encoder")
