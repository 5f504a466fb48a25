"""--unlabeled-file: texts without labels for the teacher to label, read as training files are,
without the validation and test texts, empty ones skipped, every drop counted in the log."""

import gzip
import logging

import numpy as np
import pandas as pd
import pytest
from conftest import write_csv

from trainer.data import leakage, unlabeled
from trainer.errors import UserError


def hashes(texts, column="text"):
    return leakage.text_hashes(pd.DataFrame({column: texts}), [column])


def test_rows_keep_their_positions_and_hashes(tmp_path):
    path = write_csv(tmp_path / "u.csv", [("so good",), ("meh",), ("very bad !",)], ("text",))
    split = unlabeled.load(path, ["text", None], None, {})
    assert split.positions.tolist() == [0, 1, 2]
    assert split.hashes.tolist() == hashes(["so good", "meh", "very bad !"]).tolist()
    assert np.isnan(split.labels).all() and len(split) == 3


def test_validation_and_test_texts_and_empty_rows_are_dropped_and_counted(tmp_path, caplog):
    path = write_csv(tmp_path / "u.csv", [("so good",), ("",), ("meh",), ("it was fine",)], ("text",))
    held_out = {"validation": hashes(["meh"]), "test": hashes(["it was fine", "other"])}
    with caplog.at_level(logging.INFO, logger="trainer"):
        split = unlabeled.load(path, ["text", None], None, held_out)
    assert split.positions.tolist() == [0]
    assert "1 of 4 rows of" in caplog.text and "(1 empty, 2 a validation or test text exactly" in caplog.text


def test_globs_and_gzip_are_read_as_training_files_are(tmp_path):
    write_csv(tmp_path / "a.csv", [("so good",)], ("text",))
    with gzip.open(tmp_path / "b.csv.gz", "wt", encoding="utf-8") as f:
        f.write("text\nmeh\nvery bad !\n")
    split = unlabeled.load(str(tmp_path / "*.csv*"), ["text", None], None, {})
    assert len(split) == 3


def test_a_pair_needs_both_texts_found_by_the_training_files_names(tmp_path):
    path = write_csv(tmp_path / "u.csv", [("a b", "c d")], (" Sentence1", "SENTENCE2"))
    assert len(unlabeled.load(path, ["sentence1", "sentence2"], None, {})) == 1
    single = write_csv(tmp_path / "single.csv", [("a b",)], ("sentence1",))
    with pytest.raises(UserError, match=r"^--unlabeled-file: .*single.csv has no column 'sentence2'"):
        unlabeled.load(single, ["sentence1", "sentence2"], None, {})


def test_a_file_of_nothing_but_held_out_texts_is_one_error(tmp_path):
    path = write_csv(tmp_path / "u.csv", [("meh",)], ("text",))
    with pytest.raises(UserError, match="holds no text that is not empty or a validation or test text"):
        unlabeled.load(path, ["text", None], None, {"validation": hashes(["meh"])})
