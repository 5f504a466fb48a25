"""bench/embedding_labels.py: TweetEval's labelled tweets' embeddings scored by kNN accuracy before
and after training; on the shared data, in the slow tier, the trained run beats its zero-shot score."""

import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import embedding_labels  # noqa: E402
from run import SHARED  # noqa: E402


def test_knn_accuracy_and_loss_are_compared_with_their_zero_shot_values():
    before, after = {"knn_accuracy": 0.52, "loss": 10.2}, {"knn_accuracy": 0.61, "loss": 10.4}
    metrics = {
        "zero_shot": {"validation": before},
        "validation": after,
        "hyperparameters": {"loss": "supervised-contrastive"},
        "durations": {"train": 90.0},
        "dataset_sizes": {"train": 2000, "validation": 2000},
    }
    result = embedding_labels.compare(metrics)
    assert result["better"] == {"knn_accuracy": True, "loss": False}
    assert (result["zero_shot_knn_accuracy"], result["knn_accuracy"]) == (0.52, 0.61)


@pytest.mark.slow  # about 3 minutes on 2 cores; needs ../shared/data/tweeteval
@pytest.mark.skipif(
    not os.path.exists(os.path.join(SHARED, "data", "tweeteval", "val_text.txt")), reason="no shared TweetEval here"
)
def test_on_labelled_tweets_the_supervised_loss_beats_the_encoders_own_vectors(tmp_path):
    result = embedding_labels.compare(embedding_labels.train(2000, 1, here=str(tmp_path)))
    assert result["loss_used"] == "supervised-contrastive"
    assert result["better"]["knn_accuracy"] and result["better"]["loss"], result
