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

_PADDING = {tf.string: "", tf.int64: -1, tf.float32: 0.0}


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
        self.serve = tf.function(self._serve, input_signature=[tf.TensorSpec([None], tf.string, name="text")])

    def _serve(self, text):
        words, starts, ends = split_words(text)
        inputs = pack_words(self.preprocessor, words, self.max_seq_length)
        fits = inputs["word_positions"] >= 0
        positions = tf.ragged.boolean_mask(inputs["word_positions"], fits)
        logits = self._forward({name: tf.cast(inputs[name], tf.int32) for name in INPUT_KEYS})
        at_words = tf.gather(logits, positions.to_tensor(0), batch_dims=1)
        probabilities = tf.RaggedTensor.from_tensor(tf.nn.softmax(at_words, axis=-1),
                                                    lengths=positions.row_lengths())
        starts, ends = tf.ragged.boolean_mask(starts, fits), tf.ragged.boolean_mask(ends, fits)
        outputs = spans.entity_outputs(text, starts, ends, probabilities, self.type_names)
        tag_ids = tf.argmax(probabilities.flat_values, axis=-1)
        outputs.update({"word_tags": probabilities.with_flat_values(tf.gather(self.label_names, tag_ids)),
                        "word_start": starts, "word_end": ends})
        padded = {name: self._padded(value) for name, value in outputs.items()
                  if name != "entity_count"}
        return {**padded, "entity_count": outputs["entity_count"],
                "word_count": positions.row_lengths()}

    def _padded(self, values):
        """[B, (n)] ragged or [B, n] dense as [B, max_seq_length]."""
        default = _PADDING[values.dtype]
        if isinstance(values, tf.RaggedTensor):
            values = values.to_tensor(default_value=default)
        width = self.max_seq_length - tf.shape(values)[1]
        return tf.pad(values, [[0, 0], [0, width]], constant_values=default)
