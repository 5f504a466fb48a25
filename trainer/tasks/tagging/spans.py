"""Entities of predicted tags, in the graph: what an exported tagger returns for a raw string
(its words' tags grouped into entities, with character offsets and a score), so that the
SavedModel itself answers, as the sentence tasks' exports do.

Tag ids are tags.tag_names' order: 0 is O, 2t + 1 is B- and 2t + 2 is I- of type t. A run is a
word and the words after it that are I- of its type; a run that starts with a B- is an entity,
and so is one that starts with an I- that continues nothing (after O, or after another type):
the predicted tags are read as training reads a file's, whose such I- begins an entity
(tags.repaired), and as seqeval's default mode reads them (issue #64). A run of O is none.
"""

import tensorflow as tf


def entity_runs(tag_ids: tf.RaggedTensor):
    """(type [B, (E)], first word [B, (E)], end word [B, (E)] exclusive), int64, of the entities of
    tag ids [B, (W)], in word order."""
    ids = tf.cast(tag_ids, tf.int64)
    flat = ids.flat_values
    kind = (flat - 1) // 2
    positions = tf.ragged.range(ids.row_lengths())
    # The type of the word before each, -1 for a sentence's first word.
    previous = tf.where(
        tf.equal(positions.flat_values, 0), tf.constant(-1, tf.int64), tf.concat([[-1], kind[:-1]], axis=0)
    )
    inside = (flat > 0) & (flat % 2 == 0)
    starts = ids.with_flat_values(~(inside & tf.equal(kind, previous)))  # not continuing a run
    # A run ends at a sentence's last word or before a word that starts the next run.
    last = tf.equal(positions.flat_values + 1, tf.repeat(ids.row_lengths(), ids.row_lengths()))
    ends = ids.with_flat_values(last | tf.concat([starts.flat_values[1:], [True]], axis=0))
    run_first = tf.ragged.boolean_mask(positions, starts)
    run_end = tf.ragged.boolean_mask(positions + 1, ends)
    run_tag = tf.gather(ids.flat_values, (run_first + tf.expand_dims(ids.row_starts(), 1)).flat_values)
    begins = run_first.with_flat_values(run_tag > 0)
    return (
        tf.ragged.boolean_mask(run_first.with_flat_values((run_tag - 1) // 2), begins),
        tf.ragged.boolean_mask(run_first, begins),
        tf.ragged.boolean_mask(run_end, begins),
    )


def entity_outputs(
    strings: tf.Tensor,
    starts: tf.RaggedTensor,
    ends: tf.RaggedTensor,
    probabilities: tf.RaggedTensor,
    type_names: tf.Tensor,
) -> dict:
    """The entities of [B] raw `strings` as a signature returns them, padded to the most entities
    of a row (`entity_count` says how many are real): `entity_label`, `entity_text`, the
    code-point offsets `entity_start` and `entity_end` (exclusive; -1 as padding) and
    `entity_score`, the mean over its words of the probability of the tag each was given.

    `starts`, `ends` [B, (W)]: the words' offsets (word_spans.py); `probabilities`
    [B, (W), tags]: each word's tag probabilities; `type_names` [types] string."""
    tag_ids = probabilities.with_flat_values(tf.argmax(probabilities.flat_values, axis=-1))
    kinds, first, end = entity_runs(tag_ids)
    row_starts = tf.expand_dims(tag_ids.row_starts(), 1)
    char_start = tf.gather(starts.flat_values, (first + row_starts).flat_values)
    char_end = tf.gather(ends.flat_values, (end - 1 + row_starts).flat_values)
    chosen = tf.reduce_max(probabilities.flat_values, axis=-1)
    words = tf.ragged.range((first + row_starts).flat_values, (end + row_starts).flat_values)
    score = tf.reduce_mean(tf.gather(chosen, words), axis=1)
    text = substrings(strings, kinds.with_flat_values(char_start), kinds.with_flat_values(char_end))
    ragged = {
        "entity_label": tf.gather(type_names, kinds.flat_values),
        "entity_text": text.flat_values,
        "entity_start": char_start,
        "entity_end": char_end,
        "entity_score": score,
    }
    padding = {"entity_label": "", "entity_text": "", "entity_start": -1, "entity_end": -1, "entity_score": 0.0}
    outputs = {
        name: kinds.with_flat_values(values).to_tensor(default_value=padding[name]) for name, values in ragged.items()
    }
    return {**outputs, "entity_count": kinds.row_lengths()}


def substrings(strings: tf.Tensor, starts: tf.RaggedTensor, ends: tf.RaggedTensor) -> tf.RaggedTensor:
    """[B, (n)] the parts of [B] `strings` between code-point offsets `starts` and `ends`
    [B, (n)] (exclusive), as Python slices a `str`."""
    text = tf.strings.substr(
        tf.gather(strings, starts.value_rowids()),
        tf.cast(starts.flat_values, tf.int32),
        tf.cast(ends.flat_values - starts.flat_values, tf.int32),
        unit="UTF8_CHAR",
    )
    return starts.with_flat_values(text)
