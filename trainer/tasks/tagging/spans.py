"""Entities of predicted tags, in the graph: what an exported tagger returns for a raw string
(its words' tags grouped by the strict IOB2 rules of tags.entities, with character offsets and a
score), so that the SavedModel itself answers, as the sentence tasks' exports do.

Tag ids are tags.tag_names' order: 0 is O, 2t + 1 is B- and 2t + 2 is I- of type t. A run is a
word and the words after it that are I- of its type; a run that starts with a B- is an entity,
one that starts with an I- (it continues nothing) or with O is not.
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
    previous = tf.where(tf.equal(positions.flat_values, 0), tf.constant(-1, tf.int64),
                        tf.concat([[-1], kind[:-1]], axis=0))
    inside = (flat > 0) & (flat % 2 == 0)
    starts = ids.with_flat_values(~(inside & tf.equal(kind, previous)))  # not continuing a run
    # A run ends at a sentence's last word or before a word that starts the next run.
    last = tf.equal(positions.flat_values + 1, tf.repeat(ids.row_lengths(), ids.row_lengths()))
    ends = ids.with_flat_values(last | tf.concat([starts.flat_values[1:], [True]], axis=0))
    run_first = tf.ragged.boolean_mask(positions, starts)
    run_end = tf.ragged.boolean_mask(positions + 1, ends)
    run_tag = tf.gather(ids.flat_values, (run_first + tf.expand_dims(ids.row_starts(), 1)).flat_values)
    begins = run_first.with_flat_values((run_tag > 0) & (run_tag % 2 == 1))
    return (tf.ragged.boolean_mask(run_first.with_flat_values((run_tag - 1) // 2), begins),
            tf.ragged.boolean_mask(run_first, begins), tf.ragged.boolean_mask(run_end, begins))
