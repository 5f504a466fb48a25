"""A teacher file's rows matched to a split's rows by their texts (trainer.data.teacher_file)."""

import numpy as np
import pandas as pd
import pytest

from trainer.data import leakage, teacher_file
from trainer.errors import UserError

COLUMNS = ["probability_neg", "probability_pos"]


def write(tmp_path, rows, name="teacher.csv"):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def hashes(texts, pairs=None):
    frame = pd.DataFrame({"text": texts, **({"pair": pairs} if pairs else {})})
    return leakage.text_hashes(frame, ["text", "pair" if pairs else None])


def no_problem(values):
    return None


def not_finite(values):
    """Distillation.problem's answer for a row that is not all numbers."""
    return next(((i, "not a number") for i, row in enumerate(values) if not np.isfinite(row).all()), None)


def test_rows_are_matched_by_text_in_any_order_ignoring_extra_rows(tmp_path):
    path = write(
        tmp_path,
        {
            "text": ["b", "extra", "a"],
            "predicted_label": ["pos", "neg", "neg"],
            "probability_neg": [0.2, 0.5, 0.9],
            "probability_pos": [0.8, 0.5, 0.1],
        },
    )
    found = teacher_file.read(path, ["text"], COLUMNS)
    values = teacher_file.match(found, hashes(["a", "b"]), "train", str, no_problem)
    np.testing.assert_array_equal(values, [[0.9, 0.1], [0.2, 0.8]])


def test_columns_are_taken_in_the_order_the_run_asks_for(tmp_path):
    path = write(tmp_path, {"text": ["a"], "probability_pos": [0.3], "probability_neg": [0.7]})
    found = teacher_file.read(path, ["text"], COLUMNS)
    np.testing.assert_array_equal(found.values, [[0.7, 0.3]])


def test_pairs_are_matched_by_both_texts(tmp_path):
    path = write(
        tmp_path, {"text": ["a", "a"], "pair": ["x", "y"], "probability_neg": [1.0, 0.0], "probability_pos": [0.0, 1.0]}
    )
    found = teacher_file.read(path, ["text", "pair"], COLUMNS)
    values = teacher_file.match(found, hashes(["a"], ["y"]), "train", str, no_problem)
    np.testing.assert_array_equal(values, [[0.0, 1.0]])


def test_a_repeated_text_takes_its_first_row(tmp_path):
    path = write(tmp_path, {"text": ["a", "a"], "probability_neg": [0.6, 0.1], "probability_pos": [0.4, 0.9]})
    found = teacher_file.read(path, ["text"], COLUMNS)
    np.testing.assert_array_equal(found.values, [[0.6, 0.4]])


def test_missing_rows_are_counted_and_the_first_one_quoted(tmp_path):
    path = write(tmp_path, {"text": ["a"], "probability_neg": [0.5], "probability_pos": [0.5]})
    found = teacher_file.read(path, ["text"], COLUMNS)
    texts = ["a", "not there", "nor this"]
    with pytest.raises(
        UserError,
        match=r"^--teacher-probabilities: .*teacher.csv has no row for 2 "
        r"of the 3 unlabeled texts, e.g. 'not there'$",
    ):
        teacher_file.match(found, hashes(texts), "unlabeled", lambda row: texts[row], no_problem)


def test_other_labels_are_refused_naming_both_sets(tmp_path):
    path = write(tmp_path, {"text": ["a"], "probability_neg": [0.5], "probability_neutral": [0.5]})
    with pytest.raises(
        UserError,
        match=r"holds the teacher outputs \['probability_neg', "
        r"'probability_neutral'\], but this run needs "
        r"\['probability_neg', 'probability_pos'\]: the teacher's "
        r"task or labels differ",
    ):
        teacher_file.read(path, ["text"], COLUMNS)


def test_a_regression_teacher_for_classes_is_refused(tmp_path):
    path = write(tmp_path, {"text": ["a"], "predicted_score": [0.5]})
    with pytest.raises(UserError, match="task or labels differ"):
        teacher_file.read(path, ["text"], COLUMNS)


def test_a_file_without_the_text_column_is_refused_naming_it(tmp_path):
    path = write(tmp_path, {"sentence": ["a"], "probability_neg": [0.5], "probability_pos": [0.5]})
    with pytest.raises(UserError, match="has no column 'text'"):
        teacher_file.read(path, ["text"], COLUMNS)


def test_a_bad_value_names_the_file_and_line_of_its_row(tmp_path):
    path = write(tmp_path, {"text": ["a", "b"], "probability_neg": [0.5, "x"], "probability_pos": [0.5, 0.5]})
    found = teacher_file.read(path, ["text"], COLUMNS)
    with pytest.raises(UserError, match=r"teacher.csv line 3: not a number$"):
        teacher_file.match(found, hashes(["a", "b"]), "train", str, not_finite)


def test_only_the_matched_rows_are_checked(tmp_path):
    path = write(tmp_path, {"text": ["a", "unused"], "probability_neg": [0.5, "x"], "probability_pos": [0.5, 0.5]})
    found = teacher_file.read(path, ["text"], COLUMNS)
    np.testing.assert_array_equal(teacher_file.match(found, hashes(["a"]), "train", str, not_finite), [[0.5, 0.5]])
