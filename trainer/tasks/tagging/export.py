"""A tagger's export: raw strings of any length in; entities (text, type, character offsets,
score) and each word's tag out, computed in the SavedModel itself as the sentence tasks' exports
compute theirs.

The string is split into words in the graph (word_spans.py: spaces and control
characters, and each punctuation character a word), each word into the family's pieces, and the
pieces into windows of --max-seq-length tokens, consecutive ones sharing half a window
(word_pieces.pack_word_windows): a text that fits is one window, packed as training packed it; a
longer one is read whole, each word tagged in the window where it has the most context
(modeling.encoders.word_windows, issue #64). A word's tag is read at its first piece, as it was
trained, and entities are read over the whole text. The tagger runs on at most
WINDOWS_PER_CALL windows at a time, so a long text costs no more memory per call than a batch of
short ones. A word with no piece (a lone zero-width joiner) gets no tag and belongs to no
entity; it is returned apart (`untagged_*`).

Every per-text output is padded to --max-seq-length entries, or to the batch's most words or
entities when a text has more (`entity_count`, `word_count`, `untagged_count` say how many are
real), so batches of short texts stack alike (trainer.inference.loaded_model).
"""

from collections.abc import Sequence

import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.layers import INPUT_KEYS
from trainer.tasks.tagging import spans
from trainer.tasks.tagging.word_pieces import pack_word_windows
from trainer.tasks.tagging.word_spans import split_words

_PADDING = {tf.string: "", tf.int64: -1, tf.int32: -1, tf.float32: 0.0}
# The most windows one call of the tagger computes: trainer.predict's default --batch-size, so
# a batch of short texts runs in one call, as it did before windows.
WINDOWS_PER_CALL = 128
# serve's per-word inputs to `outputs`, as `tokenize` returns them.
WORD_FEATURES = ("word_window", "word_positions", "word_start", "word_end")


def window_overlap(max_seq_length: int) -> int:
    """The pieces consecutive windows share: half a window's (its tokens less the start and end
    ones), so that each word is read with at least a quarter of a window on each side its
    window cuts (word_windows)."""
    return (max_seq_length - 2) // 2


class TaggingModule(tf.Module):
    """The export of a token-classification run: `serve(text)`, and the tags' and entity types'
    names as constants."""

    def __init__(self, preprocessor, tagger: tf_keras.Model, tag_names: Sequence[str], max_seq_length: int):
        super().__init__(name="tagger")
        self.preprocessor = preprocessor
        # Only the variables are tracked, not the Keras model (export.ServingModule says why).
        self.classifier_variables = list(tagger.variables)
        self._forward = lambda features: tagger(features, training=False)
        self.label_names = tf.constant(list(tag_names), tf.string)
        self.type_names = tf.constant([name[2:] for name in tag_names[1::2]], tf.string)
        self.max_seq_length = max_seq_length
        self._overlap = window_overlap(max_seq_length)
        # Saved, so a loaded model tells its windows (a runtime mirroring them reads it).
        self.window_overlap = tf.Variable(self._overlap, trainable=False, name="window_overlap")
        text = tf.TensorSpec([None], tf.string, name="text")
        words = tf.TensorSpec([None, None], tf.int64)
        self.serve = tf.function(self._serve, input_signature=[text])
        # serve's two halves, for a copy whose tagger runs elsewhere (the int8 one: LiteRT,
        # trainer.serving.tflite): the words and their windows, and the answers of the logits.
        # Both traced as written (explicit TensorFlow ops, nothing for AutoGraph to convert):
        # converting TF-Text's functions cost seconds of every export and of every load.
        self.tokenize = tf.function(self._tokenize, input_signature=[text], autograph=False)
        self.outputs = tf.function(
            self._outputs,
            autograph=False,
            input_signature=[
                text,
                tf.TensorSpec([None, None, len(tag_names)], tf.float32, name="logits"),
                *[words] * len(WORD_FEATURES),
            ],
        )

    def _serve(self, text):
        """tokenize, the tagger, outputs: its halves called as the functions they are, each
        traced once for the export (the words' ragged ops take seconds to trace)."""
        features = self.tokenize(text)
        return self.outputs(text, self._logits(features), *(features[name] for name in WORD_FEATURES))

    def _logits(self, features):
        """The tagger's logits [N, max_seq_length, tags] of the N windows of `features`,
        WINDOWS_PER_CALL at a time.

        It runs on the windows' longest row, not on max_seq_length: padding is masked, so the
        real tokens' logits are the same, at a fraction of the cost (WikiANN's sentences are 13
        tokens on average, of 128: 40 sentences/s on 2 cores, 6x slower than evaluation's length
        buckets, when every batch ran on 128). Its head pads the logits back to max_seq_length
        (heads.TokenPadding)."""
        width = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1))
        inputs = {name: features[name][:, :width] for name in INPUT_KEYS}
        calls = -(-tf.shape(inputs["input_mask"])[0] // WINDOWS_PER_CALL)

        def call(index, logits):
            part = {
                name: value[index * WINDOWS_PER_CALL : (index + 1) * WINDOWS_PER_CALL] for name, value in inputs.items()
            }
            return index + 1, logits.write(index, self._forward(part))

        shape = [None, self.max_seq_length, self.label_names.shape[0]]
        _, logits = tf.while_loop(
            lambda index, _: index < calls,
            call,
            [0, tf.TensorArray(tf.float32, size=calls, infer_shape=False, element_shape=shape)],
        )
        return logits.concat()

    def _tokenize(self, text):
        """The tagger's inputs [N, max_seq_length], a row per window, and per word, padded with
        -1 (WORD_FEATURES): the row it is read in and its first piece's position there (-1 for
        a word without a piece), and its offsets."""
        words, starts, ends = split_words(text)
        inputs = pack_word_windows(self.preprocessor, words, self.max_seq_length, self._overlap)
        per_word = {
            "word_window": inputs["word_window"],
            "word_positions": inputs["word_positions"],
            "word_start": starts,
            "word_end": ends,
        }
        return {
            **{name: tf.cast(inputs[name], tf.int32) for name in INPUT_KEYS},
            **{name: self._padded(value) for name, value in per_word.items()},
        }

    def _outputs(self, text, logits, word_window, word_positions, word_start, word_end):
        """The answers of the tagger's `logits` [N, T, tags] of the windows _tokenize made, for
        the words it found (WORD_FEATURES)."""
        real = word_start >= 0
        window, position, starts, ends = (
            tf.ragged.boolean_mask(value, real) for value in (word_window, word_positions, word_start, word_end)
        )
        tagged = position >= 0
        window, position, tagged_starts, tagged_ends = (
            tf.ragged.boolean_mask(value, tagged) for value in (window, position, starts, ends)
        )
        at_words = tf.gather_nd(logits, tf.stack([window.flat_values, position.flat_values], axis=1))
        probabilities = position.with_flat_values(tf.nn.softmax(at_words, axis=-1))
        outputs = spans.entity_outputs(text, tagged_starts, tagged_ends, probabilities, self.type_names)
        tag_ids = tf.argmax(probabilities.flat_values, axis=-1)
        untagged_starts, untagged_ends = (tf.ragged.boolean_mask(value, ~tagged) for value in (starts, ends))
        outputs.update(
            {
                "word_tags": probabilities.with_flat_values(tf.gather(self.label_names, tag_ids)),
                "word_text": spans.substrings(text, tagged_starts, tagged_ends),
                "word_start": tagged_starts,
                "word_end": tagged_ends,
                "word_probabilities": probabilities,
                "untagged_text": spans.substrings(text, untagged_starts, untagged_ends),
                "untagged_start": untagged_starts,
                "untagged_end": untagged_ends,
            }
        )
        padded = {name: self._padded(value) for name, value in outputs.items() if name != "entity_count"}
        # Every tag's name per row, as a sentence export's label_names: what word_probabilities'
        # columns are (a teacher's outputs are matched to its student's tags by name).
        names = tf.tile(tf.expand_dims(self.label_names, 0), [tf.shape(text)[0], 1])
        return {
            **padded,
            "entity_count": outputs["entity_count"],
            "word_count": tagged_starts.row_lengths(),
            "untagged_count": untagged_starts.row_lengths(),
            "tag_names": names,
        }

    def _padded(self, values):
        """[B, (n), ...] ragged or [B, n, ...] dense as [B, max(max_seq_length, n), ...]."""
        default = _PADDING[values.dtype]
        if isinstance(values, tf.RaggedTensor):
            values = values.to_tensor(default_value=default)
        width = tf.maximum(self.max_seq_length - tf.shape(values)[1], 0)
        inner = [[0, 0]] * (values.shape.rank - 2)
        return tf.pad(values, [[0, 0], [0, width], *inner], constant_values=default)
