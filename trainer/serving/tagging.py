"""A tagger's export: raw strings in; entities (text, type, character offsets, score) and each
word's tag out, computed in the SavedModel itself as the sentence tasks' exports compute theirs.

The string is split into words in the graph (modeling.encoders.words: spaces, and each
punctuation character a word), each word into the family's pieces (word_pieces.pack_words), and
a word's tag is read at its first piece, as it was trained. Words past --max-seq-length, or with
no piece (a lone control character), get no tag and belong to no entity. Every output is padded
to --max-seq-length entries per text (`entity_count`, `word_count` say how many are real), so
batches of any texts stack (trainer.serving.predict).
"""
from typing import Sequence

import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.layers import INPUT_KEYS
from trainer.modeling.encoders.word_pieces import pack_words
from trainer.modeling.encoders.words import split_words
from trainer.tasks.tagging import spans

_PADDING = {tf.string: "", tf.int64: -1, tf.int32: -1, tf.float32: 0.0}


class TaggingModule(tf.Module):
    """The export of a token-classification run: `serve(text)`, and the tags' and entity types'
    names as constants."""

    def __init__(self, preprocessor, tagger: tf_keras.Model, tag_names: Sequence[str],
                 max_seq_length: int):
        super().__init__(name="tagger")
        self.preprocessor = preprocessor
        # Only the variables are tracked, not the Keras model (export.ServingModule says why).
        self.classifier_variables = list(tagger.variables)
        self._forward = lambda features: tagger(features, training=False)
        self.label_names = tf.constant(list(tag_names), tf.string)
        self.type_names = tf.constant([name[2:] for name in tag_names[1::2]], tf.string)
        self.max_seq_length = max_seq_length
        text = tf.TensorSpec([None], tf.string, name="text")
        words = tf.TensorSpec([None, None], tf.int64)
        self.serve = tf.function(self._serve, input_signature=[text])
        # serve's two halves, for a copy whose tagger runs elsewhere (the int8 one: LiteRT,
        # trainer.serving.tflite): the words and their pieces, and the answers of the logits.
        self.tokenize = tf.function(self._tokenize, input_signature=[text])
        self.outputs = tf.function(self._outputs, input_signature=[
            text, tf.TensorSpec([None, None, len(tag_names)], tf.float32, name="logits"),
            words, words, words])

    def _serve(self, text):
        features = self._tokenize(text)
        # The tagger runs on the batch's longest row, not on max_seq_length: padding is masked,
        # so the real tokens' logits are the same, at a fraction of the cost (WikiANN's
        # sentences are 13 tokens on average, of 128: 40 sentences/s on 2 cores, 6x slower
        # than evaluation's length buckets, when every batch ran on 128). Its head pads the
        # logits back to max_seq_length (heads.TokenPadding).
        width = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1))
        logits = self._forward({name: features[name][:, :width] for name in INPUT_KEYS})
        return self._outputs(text, logits, features["word_positions"], features["word_start"],
                             features["word_end"])

    def _tokenize(self, text):
        """The tagger's inputs [B, max_seq_length] and, per word that fits (its first piece
        within max_seq_length), its first piece's position and its offsets, padded with -1."""
        words, starts, ends = split_words(text)
        inputs = pack_words(self.preprocessor, words, self.max_seq_length)
        fits = inputs["word_positions"] >= 0
        kept = {"word_positions": tf.cast(inputs["word_positions"], tf.int64), "word_start": starts,
                "word_end": ends}
        return {**{name: tf.cast(inputs[name], tf.int32) for name in INPUT_KEYS},
                **{name: self._padded(tf.ragged.boolean_mask(value, fits)) for name, value in kept.items()}}

    def _outputs(self, text, logits, word_positions, word_start, word_end):
        """The answers of the tagger's `logits` [B, T, tags] for the words _tokenize found."""
        fits = word_positions >= 0
        positions, starts, ends = (tf.ragged.boolean_mask(value, fits)
                                   for value in (word_positions, word_start, word_end))
        at_words = tf.gather(logits, positions.to_tensor(0), batch_dims=1)
        probabilities = tf.RaggedTensor.from_tensor(tf.nn.softmax(at_words, axis=-1),
                                                    lengths=positions.row_lengths())
        outputs = spans.entity_outputs(text, starts, ends, probabilities, self.type_names)
        tag_ids = tf.argmax(probabilities.flat_values, axis=-1)
        outputs.update({"word_tags": probabilities.with_flat_values(tf.gather(self.label_names, tag_ids)),
                        "word_start": starts, "word_end": ends, "word_probabilities": probabilities})
        padded = {name: self._padded(value) for name, value in outputs.items()
                  if name != "entity_count"}
        # Every tag's name per row, as a sentence export's label_names: what word_probabilities'
        # columns are (a teacher's outputs are matched to its student's tags by name).
        names = tf.tile(tf.expand_dims(self.label_names, 0), [tf.shape(text)[0], 1])
        return {**padded, "entity_count": outputs["entity_count"],
                "word_count": positions.row_lengths(), "tag_names": names}

    def _padded(self, values):
        """[B, (n), ...] ragged or [B, n, ...] dense as [B, max_seq_length, ...]."""
        default = _PADDING[values.dtype]
        if isinstance(values, tf.RaggedTensor):
            values = values.to_tensor(default_value=default)
        width = self.max_seq_length - tf.shape(values)[1]
        inner = [[0, 0]] * (values.shape.rank - 2)
        return tf.pad(values, [[0, 0], [0, width], *inner], constant_values=default)
