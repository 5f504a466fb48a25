"""bench/embedding_distill.py's comparison: a student with a teacher's vectors against the same
student alone, in points of Spearman and in the share of its gap to the teacher."""

import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import embedding_distill  # noqa: E402

ALONE = {"zero_shot": 0.70, "spearman": 0.80, "best_epoch": 4, "train_seconds": 100.0}
TAUGHT = {"zero_shot": 0.70, "spearman": 0.83, "best_epoch": 3, "train_seconds": 110.0}


def test_the_teachers_vectors_are_measured_as_the_share_of_the_students_gap_they_close():
    result = embedding_distill.compare(0.90, ALONE, TAUGHT)
    assert result["points"] == pytest.approx(3.0) and result["gap_closed"] == pytest.approx(0.3)


def test_a_student_alone_above_its_teacher_has_no_gap_to_close(capsys):
    result = embedding_distill.compare(0.79, ALONE, TAUGHT)
    assert result["gap_closed"] is None
    embedding_distill.report({**result, "layers": 3, "train_pairs": 3824, "validation_pairs": 425})
    text = capsys.readouterr().out
    assert "student with the teacher's vectors, 3 layers" in text and text.rstrip().endswith("+3.00 points of Spearman")
