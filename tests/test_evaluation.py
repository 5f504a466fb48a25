"""Metrics a user reads in metrics.json."""
import numpy as np
import pytest

from trainer.modeling import evaluation


def test_summary_has_per_class_scores_and_a_confusion_matrix():
    logits = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    labels = np.array([0, 1, 1, 1])
    result = evaluation.summarize(logits, labels, ["neg", "pos"])
    assert result["accuracy"] == pytest.approx(0.75)
    assert result["confusion_matrix"] == [[1, 0], [1, 2]]
    assert result["per_class"]["pos"] == {"precision": 1.0, "recall": pytest.approx(2 / 3),
                                          "f1": pytest.approx(0.8), "support": 3}
    assert result["macro_recall"] == pytest.approx((1.0 + 2 / 3) / 2)
    expected_loss = np.mean([np.log1p(np.exp(-2.0))] * 3 + [np.log1p(np.exp(2.0))])
    assert result["loss"] == pytest.approx(expected_loss)


def test_macro_averages_skip_classes_absent_from_the_split():
    logits = np.array([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    result = evaluation.summarize(logits, np.array([0, 1]), ["a", "b", "c"])
    assert result["macro_f1"] == 1.0 and result["per_class"]["c"]["support"] == 0
