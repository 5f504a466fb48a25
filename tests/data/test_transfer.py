"""Distillation's transfer set: training and unlabeled rows as one split, every row once per
epoch, the two mixed at random by their sizes, the same for one seed."""

import numpy as np

from trainer.data import input_pipeline
from trainer.data.transfer import TransferSplit


def split(first_label, rows):
    """`rows` rows of one token each, labelled first_label, first_label + 1, ..."""
    lengths = np.ones(rows, np.int32)
    return input_pipeline.TokenizedSplit(
        np.arange(rows, dtype=np.int32),
        np.zeros(rows, np.int32),
        lengths,
        np.arange(first_label, first_label + rows, dtype=np.float32),
        np.ones(rows, np.float32),
    )


def labels(dataset):
    return [float(label) for _, label, _ in dataset.as_numpy_iterator()]


def test_in_order_it_is_the_parts_one_after_the_other():
    both = TransferSplit((split(0, 5), split(100, 3)))
    assert labels(both.examples()) == [0, 1, 2, 3, 4, 100, 101, 102]
    assert len(both) == 8 and both.lengths.tolist() == [1] * 8 and both.real_tokens == 8


def test_shuffled_every_row_comes_once_and_the_parts_mix():
    both = TransferSplit((split(0, 50), split(100, 50)))
    drawn = labels(both.examples(seed=3))
    assert sorted(drawn) == sorted(list(range(50)) + list(range(100, 150)))
    assert any(label >= 100 for label in drawn[:25])  # not one part, then the other


def test_one_seed_draws_the_same_order_and_another_seed_another():
    both = TransferSplit((split(0, 30), split(100, 30)))
    assert labels(both.examples(seed=7)) == labels(both.examples(seed=7))
    assert labels(both.examples(seed=7)) != labels(both.examples(seed=8))


def test_length_buckets_count_the_batches_of_both_parts():
    both = TransferSplit((split(0, 5), split(100, 3)))
    assert input_pipeline.Batching(4, input_pipeline.padded_lengths(16), bucket=True).steps(both) == 2
