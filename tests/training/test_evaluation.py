"""Metrics a user reads in metrics.json."""

import numpy as np
import pytest

from trainer.modeling import split_outputs
from trainer.tasks.classification import metrics


def test_summary_has_per_class_scores_and_a_confusion_matrix():
    logits = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    labels = np.array([0, 1, 1, 1])
    result = metrics.summarize(logits, labels, ["neg", "pos"])
    assert result["accuracy"] == pytest.approx(0.75)
    assert result["confusion_matrix"] == [[1, 0], [1, 2]]
    assert result["per_class"]["pos"] == {
        "precision": 1.0,
        "recall": pytest.approx(2 / 3),
        "f1": pytest.approx(0.8),
        "support": 3,
    }
    assert result["macro_recall"] == pytest.approx((1.0 + 2 / 3) / 2)
    expected_loss = np.mean([np.log1p(np.exp(-2.0))] * 3 + [np.log1p(np.exp(2.0))])
    assert result["loss"] == pytest.approx(expected_loss)


def test_macro_averages_skip_classes_absent_from_the_split():
    logits = np.array([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    result = metrics.summarize(logits, np.array([0, 1]), ["a", "b", "c"])
    assert result["macro_f1"] == 1.0 and result["per_class"]["c"]["support"] == 0


def test_train_metrics_sample_is_fixed_by_the_seed_and_sorted():
    from trainer.training.results import sample_rows

    rows = sample_rows(1_000_000, 10_000, seed=7)
    assert len(rows) == len(np.unique(rows)) == 10_000
    assert (np.diff(rows) > 0).all() and rows[0] >= 0 and rows[-1] < 1_000_000
    assert (rows == sample_rows(1_000_000, 10_000, seed=7)).all()
    assert not (rows == sample_rows(1_000_000, 10_000, seed=8)).all()


def test_a_training_set_smaller_than_the_sample_is_evaluated_whole():
    from trainer.training.results import sample_rows, train_sample

    assert sample_rows(90, 10_000, seed=7).tolist() == list(range(90))
    assert train_sample(90, seed=7)["rows"] == 90
    assert train_sample(60_000, seed=7)["rows"] == 2_000


def test_predictions_come_back_in_row_order_without_padding_rows():
    class Model:  # what Keras' predict returns for three batches of a length-bucketed split
        def predict(self, dataset, verbose=0, callbacks=()):
            return {
                "logits": np.array([[2.0], [0.0], [9.0], [1.0], [3.0]]),
                "label": np.array([2, 0, 0, 1, 3]),
                "weight": np.array([1, 1, 0, 1, 1.0]),
                "row": np.array([2, 0, 0, 1, 3]),
            }

    logits, labels = split_outputs.predict_logits(Model(), dataset=None)
    assert logits[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert labels.tolist() == [0, 1, 2, 3] and labels.dtype == np.int64
