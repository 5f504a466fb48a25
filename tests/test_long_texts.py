"""Texts over --max-seq-length: the cut is counted, said, and the metrics are broken down by length."""
import logging

import numpy as np
import pytest

from trainer.tasks.classification import ClassificationTask
from trainer.training import long_texts

LIMIT = 10


class Split:
    def __init__(self, full_lengths):
        self.full_lengths = np.asarray(full_lengths)


def test_only_texts_longer_than_the_limit_count_as_cut():
    assert long_texts.cut_counts({"train": Split([9, 10, 11, 50]), "test": Split([3])}, LIMIT) == \
        {"train": 2, "test": 0}


def test_a_cut_is_one_warning_naming_each_splits_share(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 88, "test": 0}, {"train": 100, "test": 20}, 128)
    (record,) = caplog.records
    assert "cut to their first 128" in record.getMessage()
    assert "train 88 of 100 (88%), test 0 of 20 (0%)" in record.getMessage()


def test_nothing_cut_says_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        long_texts.log_cut({"train": 0}, {"train": 100}, 128)
    assert not caplog.records


def test_each_length_bucket_scores_only_its_own_rows():
    full = np.array([5, 10, 11, 40, 41, 400])  # up to 1x: 2 rows, 1-4x: 2, over 4x: 2
    labels = np.array([0, 1, 0, 1, 0, 1])
    logits = np.array([[2, 0], [0, 2], [0, 2], [0, 2], [0, 2], [2, 0]], np.float64)  # rows 2, 4, 5 wrong
    out = long_texts.by_length(full, LIMIT, logits, labels, ClassificationTask(), ["a", "b"])
    assert [(b["tokens"], b["examples"]) for b in out.values()] == [
        ("up to 10", 2), ("11-40", 2), ("over 40", 2)]
    assert [b["accuracy"] for b in out.values()] == pytest.approx([1.0, 0.5, 0.0])
    assert set(out["up_to_1x"]) == {"tokens", "examples", "loss", "accuracy", "macro_f1", "macro_recall"}


def test_an_empty_bucket_has_its_count_and_no_scores():
    out = long_texts.by_length(np.array([5, 6]), LIMIT, np.zeros((2, 2)), np.array([0, 1]),
                               ClassificationTask(), ["a", "b"])
    assert out["over_4x"] == {"tokens": "over 40", "examples": 0}
