"""Reading, validating and splitting labelled text files."""
import json

import numpy as np
import pytest

from trainer import config as config_lib
from trainer.data import labels as labels_lib, splits as data
from trainer.errors import UserError


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def make_config(*argv):
    return config_lib.build_config(list(argv), {})


def load(*argv):
    return data.load_datasets(make_config(*argv))


SEED_SCHEMA = "postId,bodyText,sentiment\n" + "".join(
    f"p{i},post number {i},{score}\n" for i, score in enumerate([-0.5, 0.0, 0.7] * 10))


def test_seed_schema_maps_scores_to_negative_neutral_positive(tmp_path):
    path = write(tmp_path / "posts.csv", SEED_SCHEMA)
    d = load("--training-file", path, "--validation-file", path)
    assert (d.text_column, d.label_column) == ("bodyText", "sentiment")
    assert d.labels.kind == "score" and d.labels.names == ["negative", "neutral", "positive"]
    assert d.validation.labels.tolist()[:3] == [0, 1, 2]


def test_string_labels_are_learned_sorted_from_training_data(tmp_path):
    path = write(tmp_path / "t.csv", "sentence,label\nfine,pos\nbad,neg\nok,mid\ngreat,pos\n")
    d = load("--training-file", path, "--validation-file", path)
    assert d.text_column == "sentence"
    assert d.labels.kind == "name" and d.labels.names == ["mid", "neg", "pos"]


def test_integer_labels_take_names_from_flag(tmp_path):
    path = write(tmp_path / "t.csv", "text,label\na,0\nb,1\nc,2\nd,1\n")
    d = load("--training-file", path, "--validation-file", path,
             "--label-names", "negative,neutral,positive")
    assert d.labels.kind == "index" and d.labels.names == ["negative", "neutral", "positive"]
    assert d.train.labels.tolist() == [0, 1, 2, 1]


def test_tsv_and_jsonl_are_read_by_extension(tmp_path):
    tsv = write(tmp_path / "t.tsv", "text\tlabel\nhello, world\t1\nbye\t0\n")
    jsonl = write(tmp_path / "v.jsonl", '{"text": "hi", "label": 1}\n{"text": "no", "label": 0}\n')
    d = load("--training-file", tsv, "--validation-file", jsonl)
    assert d.train.texts.tolist() == ["hello, world", "bye"]
    assert d.validation.labels.tolist() == [1, 0]


def test_several_files_per_split_by_comma_and_glob(tmp_path):
    for i in range(3):
        write(tmp_path / f"part{i}.csv", f"text,label\na{i},0\nb{i},1\n")
    by_glob = load("--training-file", str(tmp_path / "part*.csv"),
                   "--validation-file", str(tmp_path / "part0.csv"))
    by_comma = load("--training-file", f"{tmp_path}/part0.csv,{tmp_path}/part1.csv",
                    "--validation-file", str(tmp_path / "part0.csv"))
    assert len(by_glob.train) == 6 and len(by_comma.train) == 4


def test_without_validation_file_a_stratified_split_is_carved(tmp_path):
    rows = "".join(f"t{i},{i % 3}\n" for i in range(300))
    path = write(tmp_path / "t.csv", "text,label\n" + rows)
    d = load("--training-file", path, "--validation-fraction", "0.2")
    assert len(d.validation) == 60 and len(d.train) == 240
    assert np.bincount(d.validation.labels).tolist() == [20, 20, 20]
    assert not set(d.train.texts) & set(d.validation.texts)


def test_train_fraction_keeps_class_balance_and_validation(tmp_path):
    rows = "".join(f"t{i},{i % 2}\n" for i in range(400))
    path = write(tmp_path / "t.csv", "text,label\n" + rows)
    full = load("--training-file", path)
    quarter = load("--training-file", path, "--train-fraction", "0.25")
    assert len(quarter.train) == 90
    assert np.bincount(quarter.train.labels).tolist() == [45, 45]
    assert quarter.validation.texts.tolist() == full.validation.texts.tolist()


def test_skip_empty_text_counts_skipped_rows(tmp_path):
    path = write(tmp_path / "t.csv", 'text,label\nok,1\n"",0\n  ,1\nfine,0\n')
    d = load("--training-file", path, "--validation-file", path, "--skip-empty-text")
    assert len(d.train) == 2 and d.rows_skipped() == {"train": 2, "validation": 2}


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("content, expected", [
    ("", "file is empty"),
    ("text,label\n", "no data rows"),
    ("text,label\nhello,1\n,0\n", "row 2, column 'text': text is empty"),
    ("text,label\nhello,1\nbye,\n", "row 2, column 'label': label is missing"),
    ("text,label\nhello,1\nbye,NaN\n", "row 2, column 'label': label is missing"),
    ("text,label\nhello,1\nbye,1\n", "single class"),
    ("body,label\nhello,1\n", "no text column found"),
    ("text,sentiment\na,0.5\nb,-0.2\nc,1.5\n", "row 3, column 'sentiment': sentiment score 1.5 is outside [-1, 1]"),
    ("text,sentiment\na,0.5\nb,-0.2\nc,abc\n", "row 3, column 'sentiment': 'abc' is not a number"),
])
def test_bad_training_file_names_file_row_and_column(tmp_path, content, expected):
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(UserError, match="bad.csv") as e:
        load("--training-file", path)
    assert expected in str(e.value)


def test_missing_named_column_lists_existing_columns(tmp_path):
    path = write(tmp_path / "t.csv", "text,label\na,0\nb,1\n")
    with pytest.raises(UserError, match=r"--text-column: column 'body' is not in .*t.csv; its columns are \['text', 'label'\]"):
        load("--training-file", path, "--text-column", "body")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(UserError, match=r"--validation-file: file not found: .*nope.csv"):
        load("--training-file", write(tmp_path / "t.csv", "text,label\na,0\nb,1\n"),
             "--validation-file", str(tmp_path / "nope.csv"))


def test_label_unseen_in_training_is_an_error_in_validation(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\na,pos\nb,neg\n")
    val = write(tmp_path / "v.csv", "text,label\na,pos\nb,meh\n")
    with pytest.raises(UserError, match=r"v.csv row 2, column 'label': label 'meh' never appears in the training data"):
        load("--training-file", train, "--validation-file", val)


def test_class_id_beyond_training_classes_is_an_error_in_test(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\na,0\nb,1\n")
    test = write(tmp_path / "x.csv", "text,label\na,0\nb,2\n")
    with pytest.raises(UserError, match=r"x.csv row 2, column 'label': class id '2' is not among the 2 classes"):
        load("--training-file", train, "--validation-file", train, "--testing-file", test)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = write(tmp_path / "t.csv", "text,label\nfine,0\n".encode() + b"caf\xe9,1\n")
    with pytest.raises(UserError, match=r"t.csv: line 3 is not valid UTF-8"):
        load("--training-file", path)


def test_unknown_extension_says_which_are_known(tmp_path):
    path = write(tmp_path / "t.xlsx", "whatever")
    with pytest.raises(UserError, match=r"--training-file: cannot tell the format .* use one of .csv"):
        load("--training-file", path)


def test_invalid_json_line_is_named(tmp_path):
    path = write(tmp_path / "t.jsonl", '{"text": "a", "label": 0}\n{"text": \n')
    with pytest.raises(UserError, match=r"t.jsonl: line 2 is not valid JSON"):
        load("--training-file", path)


def test_labels_file_round_trips_as_json():
    spec = labels_lib.LabelSpec("name", ["a", "b"])
    assert json.loads(json.dumps(spec.to_dict())) == {"kind": "name", "names": ["a", "b"]}


def test_without_data_flags_the_shipped_sample_posts_are_used():
    d = load()
    assert (d.text_column, d.label_column) == ("bodyText", "sentiment")
    assert d.labels.names == ["negative", "neutral", "positive"]
    assert d.sizes() == {"train": 288, "validation": 36, "test": 36}
    assert np.bincount(d.train.labels).tolist() == [96, 96, 96]


def test_balanced_class_weights_have_mean_one_over_examples():
    labels = np.array([0, 0, 0, 1])
    weights = data.class_weights(labels, 2)
    assert weights[labels].mean() == pytest.approx(1.0)
    assert weights[1] == pytest.approx(3 * weights[0])
