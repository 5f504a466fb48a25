"""Entities of predicted tag ids in the graph (trainer/tasks/tagging/spans.py): the same as the
strict IOB2 rules of tags.entities, which the entity scores use."""
import random

import tensorflow as tf

from trainer.tasks.tagging import spans, tags

TYPES = ["LOC", "ORG", "PER"]
NAMES = tags.tag_names(TYPES)


def runs(sequences, function=spans.entity_runs):
    kinds, firsts, ends = function(tf.ragged.constant(sequences, dtype=tf.int64, ragged_rank=1))
    return [[(TYPES[k], f, e) for k, f, e in zip(*row)]
            for row in zip(kinds.to_list(), firsts.to_list(), ends.to_list())]


def test_the_graphs_entities_equal_the_strict_rules_on_500_random_sentences():
    rng = random.Random(3)
    sequences = [[rng.randrange(len(NAMES)) for _ in range(rng.randint(0, 10))] for _ in range(500)]
    assert runs(sequences) == [tags.entities([NAMES[i] for i in s]) for s in sequences]


def test_a_b_tag_then_its_i_tags_is_one_entity_and_a_lone_i_tag_none():
    b_per, i_per, i_loc = NAMES.index("B-PER"), NAMES.index("I-PER"), NAMES.index("I-LOC")
    assert runs([[b_per, i_per, 0, i_loc, i_loc], [], [b_per]]) == [[("PER", 0, 2)], [], [("PER", 0, 1)]]


def test_it_runs_in_a_traced_function_as_an_export_calls_it():
    traced = tf.function(spans.entity_runs, input_signature=[
        tf.RaggedTensorSpec([None, None], tf.int64, ragged_rank=1)])
    b_org, i_org = NAMES.index("B-ORG"), NAMES.index("I-ORG")
    assert runs([[0, b_org, i_org]], traced) == [[("ORG", 1, 3)]]
