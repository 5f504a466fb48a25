"""bench/embedding_pairs.py: MRPC's paraphrases as pairs without a score, validation pairs whose
sentences were trained on left out, and the retrieval metrics before and after training; on the
shared data, in the slow tier, the trained run beats its zero-shot score."""

import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import embedding_pairs  # noqa: E402


def test_a_validation_pair_with_a_trained_sentence_is_left_out():
    train = [("The cat sat.", "A cat was sitting.")]
    validation = [("the cat sat", "Cats sit."), ("Dogs bark.", "A dog barks.")]
    assert embedding_pairs.unseen(validation, train) == [("Dogs bark.", "A dog barks.")]


def test_only_paraphrases_are_read(tmp_path):
    path = tmp_path / "mrpc.csv"
    path.write_text('sentence1,sentence2,label\na,b,1\nc,d,0\n"e, f",g,1\n')
    assert embedding_pairs.paraphrases(str(path)) == [("a", "b"), ("e, f", "g")]


def test_each_metric_is_compared_with_its_zero_shot_value_and_a_lower_loss_is_better():
    before = {"mrr_at_10": 0.9, "ndcg_at_10": 0.9, "recall_at_1": 0.8, "recall_at_10": 1.0, "loss": 0.2}
    after = {**before, "mrr_at_10": 0.95, "loss": 0.1}
    metrics = {"zero_shot": {"validation": before}, "validation": after}
    result = embedding_pairs.compare({**metrics, "hyperparameters": {"loss": "x"}, "durations": {"train": 5.0}})
    assert result["better"] == {
        "mrr_at_10": True,
        "ndcg_at_10": False,
        "recall_at_1": False,
        "recall_at_10": False,
        "loss": True,
    }


@pytest.mark.slow  # about 2.5 minutes on 2 cores; needs ../shared/data/glue
@pytest.mark.skipif(
    not os.path.exists(os.path.join(embedding_pairs.GLUE, "mrpc_train.csv")), reason="no shared GLUE data here"
)
def test_on_mrpc_paraphrases_in_batch_negatives_beat_the_encoders_own_vectors(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding_pairs, "HERE", str(tmp_path))
    data = embedding_pairs.split()
    job = tmp_path / "job"
    files = ["--training-file", data["train_file"], "--validation-file", data["validation_file"]]
    metrics = embedding_pairs.train_once(str(job), ["--task", "embedding", *files, "--epochs", "1"])
    result = embedding_pairs.compare(metrics)
    assert result["loss_used"] == "multiple-negatives"
    assert result["better"]["mrr_at_10"] and result["better"]["ndcg_at_10"] and result["better"]["loss"], result
