"""bench/embedding.py's comparison: the trainer's last epoch against sentence-transformers' last,
in points of Spearman and in training time, the kept epoch shown beside it."""

import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import embedding  # noqa: E402

OURS = {
    "metrics": {"zero_shot": {"validation": {"spearman": 0.80}}, "best_epoch": 1, "validation": {"spearman": 0.86}},
    "history": [{"val_spearman": "0.86", "seconds": "30"}, {"val_spearman": "0.85", "seconds": "20"}],
}
THEIRS = {"zero_shot_spearman": 0.80, "spearman": 0.855, "train_seconds": 150.0}


def test_the_trainers_last_epoch_is_compared_with_the_references_last():
    result = embedding.compare(OURS, THEIRS)
    assert result["trainer_spearman"] == 0.85 and result["points"] == pytest.approx(-0.5)
    assert result["trainer_train_seconds"] == 50 and result["faster"] == pytest.approx(3.0)
    assert (result["trainer_best_epoch"], result["trainer_best_spearman"]) == (1, 0.86)


def test_the_report_names_both_sides_and_the_kept_epoch(capsys):
    embedding.report(embedding.compare(OURS, THEIRS), (3000, 400))
    text = capsys.readouterr().out
    assert "sentence-transformers (float32)     0.8000    0.8550      150" in text
    assert "-0.50 points, 3.00x faster; the trainer keeps epoch 1 (validation Spearman 0.8600)" in text
