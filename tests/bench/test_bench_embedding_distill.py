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


def test_a_teacher_is_measured_as_the_share_of_the_students_gap_it_closes():
    result = embedding_distill.compare(0.90, ALONE, TAUGHT)
    assert result["points"] == pytest.approx(3.0) and result["gap_closed"] == pytest.approx(0.3)


def test_a_student_alone_above_its_teacher_has_no_gap_to_close(capsys):
    below = embedding_distill.compare(0.79, ALONE, TAUGHT)
    assert below["gap_closed"] is None
    teachers = {"fine-tuned": embedding_distill.compare(0.90, ALONE, TAUGHT), "mpnet": below}
    result = {"layers": 3, "alone": ALONE, "teachers": teachers, "train_pairs": 3824, "validation_pairs": 425}
    embedding_distill.report(result)
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert (
        lines[-2]
        == "the default encoder fine-tuned (6 layers): +3.00 points of Spearman, 30% of the student's gap to it"
    )
    assert lines[-1] == "all-mpnet-base-v2's vectors (untrained here): +3.00 points of Spearman"
