"""Entities of predicted tag ids in the graph (trainer/tasks/tagging/spans.py): the tags read as
training reads a file's (tags.repaired: an I- that continues nothing begins an entity), then by
the strict IOB2 rules of tags.entities."""

import random

import numpy as np
import tensorflow as tf

from trainer.tasks.tagging import spans, tags

TYPES = ["LOC", "ORG", "PER"]
NAMES = tags.tag_names(TYPES)


def runs(sequences, function=spans.entity_runs):
    kinds, firsts, ends = function(tf.ragged.constant(sequences, dtype=tf.int64, ragged_rank=1))
    return [
        [(TYPES[k], f, e) for k, f, e in zip(*row)] for row in zip(kinds.to_list(), firsts.to_list(), ends.to_list())
    ]


def test_the_graphs_entities_equal_trainings_reading_of_the_tags_on_500_random_sentences():
    rng = random.Random(3)
    sequences = [[rng.randrange(len(NAMES)) for _ in range(rng.randint(0, 10))] for _ in range(500)]
    assert runs(sequences) == [tags.entities(tags.repaired([NAMES[i] for i in s])) for s in sequences]


def test_a_b_tag_then_its_i_tags_is_one_entity():
    b_per, i_per = NAMES.index("B-PER"), NAMES.index("I-PER")
    assert runs([[b_per, i_per, 0, b_per], [], [b_per]]) == [[("PER", 0, 2), ("PER", 3, 4)], [], [("PER", 0, 1)]]


def test_an_i_tag_that_continues_nothing_begins_an_entity_as_in_training_data():
    """Issue #64: training reads such an I- in a file as a B- (tags.repaired); prediction
    dropped it."""
    i_per, i_loc = NAMES.index("I-PER"), NAMES.index("I-LOC")
    assert runs([[i_per, i_per, 0, i_loc, i_per]]) == [[("PER", 0, 2), ("LOC", 3, 4), ("PER", 4, 5)]]


def test_it_runs_in_a_traced_function_as_an_export_calls_it():
    traced = tf.function(
        spans.entity_runs, input_signature=[tf.RaggedTensorSpec([None, None], tf.int64, ragged_rank=1)]
    )
    b_org, i_org = NAMES.index("B-ORG"), NAMES.index("I-ORG")
    assert runs([[0, b_org, i_org]], traced) == [[("ORG", 1, 3)]]


def test_entities_come_back_with_code_point_offsets_into_the_raw_string():
    from trainer.tasks.tagging.word_spans import split_words

    texts = ["Zoë  flew to São Paulo 🎉!", "nothing here", ""]
    _, starts, ends = split_words(tf.constant(texts))
    given = [["B-PER", "O", "O", "B-LOC", "I-LOC", "O", "O"], ["O", "O"], []]
    one_hot = [[[0.9 if name == tag else 0.1 / (len(NAMES) - 1) for name in NAMES] for tag in row] for row in given]
    probabilities = tf.ragged.constant(one_hot, ragged_rank=1, inner_shape=(len(NAMES),), dtype=tf.float32)
    out = spans.entity_outputs(tf.constant(texts), starts, ends, probabilities, tf.constant(TYPES))
    assert out["entity_count"].numpy().tolist() == [2, 0, 0]
    assert [t.decode() for t in out["entity_text"].numpy()[0]] == ["Zoë", "São Paulo"]
    assert [texts[0][a:b] for a, b in zip(out["entity_start"].numpy()[0], out["entity_end"].numpy()[0])] == [
        "Zoë",
        "São Paulo",
    ]
    assert [label.decode() for label in out["entity_label"].numpy()[0]] == ["PER", "LOC"]
    assert out["entity_score"].numpy()[0].tolist() == [np.float32(0.9)] * 2
    assert out["entity_start"].numpy()[1].tolist() == [-1, -1]
