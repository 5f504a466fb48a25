"""Reading, validating and splitting labelled text files."""

import json
import pathlib

import numpy as np
import pytest

from trainer import config as config_lib
from trainer import task_registry
from trainer.data import splits as data
from trainer.data.labels import LabelSpec
from trainer.errors import UserError


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def make_config(*argv):
    return config_lib.build_config(list(argv), {})


def load(*argv):
    """The fixtures below hold a row or two per class: the class-size check (tested on its own
    with its default) is lowered to one row."""
    return data.load_datasets(make_config("--min-examples-per-class", "1", *argv))


def texts(datasets, name):
    return datasets.read_texts(name)[name][0].tolist()


def load_with_defaults(*argv):
    return data.load_datasets(make_config(*argv))


def twin(path):
    """The same rows under another name and with other bytes (a trailing blank line, which
    reading skips): a validation file for tests that validate on their training rows, since the
    very same file is refused."""
    source = pathlib.Path(path)
    return write(source.with_name(f"held-out-{source.name}"), source.read_bytes() + b"\n")


SEED_SCHEMA = "postId,bodyText,sentiment\n" + "".join(
    f"p{i},post number {i},{score}\n" for i, score in enumerate([-0.5, 0.0, 0.7] * 10)
)


def test_seed_schema_maps_scores_to_negative_neutral_positive(tmp_path):
    path = write(tmp_path / "posts.csv", SEED_SCHEMA)
    d = load("--training-file", path, "--validation-file", twin(path))
    assert (d.text_column, d.label_column) == ("bodyText", "sentiment")
    assert d.labels.kind == "score" and d.labels.names == ["negative", "neutral", "positive"]
    assert d.validation.labels.tolist()[:3] == [0, 1, 2]


def test_string_labels_are_learned_sorted_from_training_data(tmp_path):
    path = write(tmp_path / "t.csv", "sentence,label\nfine,pos\nbad,neg\nok,mid\ngreat,pos\n")
    d = load("--training-file", path, "--validation-file", twin(path))
    assert d.text_column == "sentence"
    assert d.labels.kind == "name" and d.labels.names == ["mid", "neg", "pos"]


def test_integer_labels_take_names_from_flag(tmp_path):
    path = write(tmp_path / "t.csv", "text,label\na,0\nb,1\nc,2\nd,1\n")
    d = load("--training-file", path, "--validation-file", twin(path), "--label-names", "negative,neutral,positive")
    assert d.labels.kind == "index" and d.labels.names == ["negative", "neutral", "positive"]
    assert d.train.labels.tolist() == [0, 1, 2, 1]


def test_tsv_and_jsonl_are_read_by_extension(tmp_path):
    tsv = write(tmp_path / "t.tsv", "text\tlabel\nhello, world\t1\nbye\t0\n")
    jsonl = write(tmp_path / "v.jsonl", '{"text": "hi", "label": 1}\n{"text": "no", "label": 0}\n')
    d = load("--training-file", tsv, "--validation-file", jsonl)
    assert texts(d, "train") == ["hello, world", "bye"]
    assert d.validation.labels.tolist() == [1, 0]


def test_several_files_per_split_by_comma_and_glob(tmp_path):
    for i in range(3):
        write(tmp_path / f"part{i}.csv", f"text,label\na{i},0\nb{i},1\n")
    by_glob = load("--training-file", str(tmp_path / "part*.csv"), "--validation-file", twin(tmp_path / "part0.csv"))
    by_comma = load(
        "--training-file",
        f"{tmp_path}/part0.csv,{tmp_path}/part1.csv",
        "--validation-file",
        twin(tmp_path / "part0.csv"),
    )
    assert len(by_glob.train) == 6 and len(by_comma.train) == 4


def test_without_validation_file_a_stratified_split_is_carved(tmp_path):
    rows = "".join(f"t{i},{i % 3}\n" for i in range(300))
    path = write(tmp_path / "t.csv", "text,label\n" + rows)
    d = load("--training-file", path, "--validation-fraction", "0.2")
    assert len(d.validation) == 60 and len(d.train) == 240
    assert np.bincount(d.validation.labels).tolist() == [20, 20, 20]
    assert not set(texts(d, "train")) & set(texts(d, "validation"))


def test_train_fraction_keeps_class_balance_and_validation(tmp_path):
    rows = "".join(f"t{i},{i % 2}\n" for i in range(400))
    path = write(tmp_path / "t.csv", "text,label\n" + rows)
    full = load("--training-file", path)
    quarter = load("--training-file", path, "--train-fraction", "0.25")
    assert len(quarter.train) == 90
    assert np.bincount(quarter.train.labels).tolist() == [45, 45]
    assert texts(quarter, "validation") == texts(full, "validation")


def test_skip_empty_text_counts_skipped_rows(tmp_path):
    path = write(tmp_path / "t.csv", 'text,label\nok,1\n"",0\n  ,1\nfine,0\n')
    d = load("--training-file", path, "--validation-file", twin(path), "--skip-empty-text")
    assert len(d.train) == 2 and d.rows_skipped() == {"train": 2, "validation": 2}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "file is empty"),
        ("text,label\n", "no data rows"),
        ("text,label\nhello,1\n,0\n", "line 3, column 'text': text is empty"),
        ("text,label\nhello,1\nbye,\n", "line 3, column 'label': label is missing"),
        ("text,label\nhello,1\nbye,NaN\n", "line 3, column 'label': label is missing"),
        ("text,label\nhello,1\nbye,1\n", "single class"),
        ("body,label\nhello,1\n", "no text column found"),
        (
            "text,sentiment\na,0.5\nb,-0.2\nc,1.5\n",
            "line 4, column 'sentiment': sentiment score 1.5 is outside [-1, 1]",
        ),
        (
            "text,sentiment\na,0.5\nb,-0.2\nc,abc\n",
            "line 4, column 'sentiment': label 'abc' is not a number, while 2 of 3 labels are",
        ),
    ],
)
def test_bad_training_file_names_file_row_and_column(tmp_path, content, expected):
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(UserError, match="bad.csv") as e:
        load("--training-file", path)
    assert expected in str(e.value)


def test_missing_named_column_lists_existing_columns(tmp_path):
    path = write(tmp_path / "t.csv", "text,label\na,0\nb,1\n")
    with pytest.raises(
        UserError, match=r"--text-column: column 'body' is not in .*t.csv; its columns are \['text', 'label'\]"
    ):
        load("--training-file", path, "--text-column", "body")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(UserError, match=r"--validation-file: file not found: .*nope.csv"):
        load(
            "--training-file",
            write(tmp_path / "t.csv", "text,label\na,0\nb,1\n"),
            "--validation-file",
            str(tmp_path / "nope.csv"),
        )


def test_label_unseen_in_training_is_an_error_in_validation(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\na,pos\nb,neg\n")
    val = write(tmp_path / "v.csv", "text,label\na,pos\nb,meh\n")
    with pytest.raises(
        UserError, match=r"v.csv line 3, column 'label': label 'meh' never appears in the training data"
    ):
        load("--training-file", train, "--validation-file", val)


def test_class_id_beyond_training_classes_is_an_error_in_test(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\na,0\nb,1\n")
    test = write(tmp_path / "x.csv", "text,label\na,0\nb,2\n")
    with pytest.raises(UserError, match=r"x.csv line 3, column 'label': class id '2' is not among the 2 classes"):
        load("--training-file", train, "--validation-file", twin(train), "--testing-file", test)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = write(tmp_path / "t.csv", b"text,label\nfine,0\n" + b"caf\xe9,1\n")
    with pytest.raises(UserError, match=r"t.csv line 3 is not valid UTF-8"):
        load("--training-file", path)


def test_unknown_extension_says_which_are_known(tmp_path):
    path = write(tmp_path / "t.xlsx", "whatever")
    with pytest.raises(UserError, match=r"--training-file: cannot tell the format .* use one of .csv"):
        load("--training-file", path)


def test_invalid_json_line_is_named(tmp_path):
    path = write(tmp_path / "t.jsonl", '{"text": "a", "label": 0}\n{"text": \n')
    with pytest.raises(UserError, match=r"t.jsonl line 2 is not valid JSON"):
        load("--training-file", path)


def test_labels_file_round_trips_as_json():
    spec = LabelSpec("name", ["a", "b"])
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


# --------------------------------------------------------------------------- every line is one row

QUOTED_TWEETS = [
    '"Thank you" he said, and left',
    'she wrote "never again',
    'a lone " in the middle',
    '""double""',
    "it's 5'11\" tall",
    'ends with a quote"',
] * 4


def tsv_of(texts, labels):
    return "text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in zip(texts, labels))


def test_tsv_texts_keep_their_quotes_and_every_line_is_a_row(tmp_path):
    labels = ["positive", "negative", "neutral"] * 8
    path = write(tmp_path / "tweets.tsv", tsv_of(QUOTED_TWEETS, labels))
    d = load_with_defaults("--training-file", path, "--validation-file", twin(path))
    assert len(d.train) == len(QUOTED_TWEETS) == 24
    assert texts(d, "train") == QUOTED_TWEETS
    assert [d.labels.names[i] for i in d.train.labels] == labels


def test_a_tab_inside_a_tsv_text_stops_at_its_line(tmp_path):
    path = write(tmp_path / "t.tsv", "text\tlabel\nfine\t0\n\nhas\ta tab\t1\nok\t1\n")
    with pytest.raises(UserError, match=r"t.tsv line 4 holds 3 fields, the header 2 \(a tab inside a text\?"):
        load("--training-file", path)


def test_csv_quoted_fields_may_span_lines_and_count_as_one_row(tmp_path):
    path = write(tmp_path / "t.csv", 'text,label\n"first line\nsecond line",pos\n"say ""hi""",neg\nplain,mid\n')
    d = load("--training-file", path, "--validation-file", twin(path))
    assert texts(d, "train") == ["first line\nsecond line", 'say "hi"', "plain"]


@pytest.mark.parametrize(
    "content, expected",
    [
        ('text,label\nok,pos\n"never closed,neg\nmore,pos\n', r": the record starting on line 3 is not valid CSV"),
        ('text,label\nok,pos\n"quoted" then text,neg\n', r": the record starting on line 3 is not valid CSV"),
        ("text,label\nok,pos\nan, unquoted comma,neg\n", r" line 3 holds 3 fields, the header 2 \(an unquoted comma"),
        ('text,label\nok,pos\n"two\nlines",neg,extra\n', r" lines 3-4 hold 3 fields"),
        ("text,label\nok,pos\nno label\n", r" line 3 holds 1 fields, the header 2"),
        ("text,text\nok,pos\n", r" line 1: column 'text' appears twice in the header"),
    ],
)
def test_a_csv_line_that_is_not_one_row_is_named(tmp_path, content, expected):
    path = write(tmp_path / "t.csv", content)
    with pytest.raises(UserError, match="t.csv" + expected):
        load("--training-file", path)


def test_a_jsonl_row_per_non_blank_line(tmp_path):
    path = write(tmp_path / "t.jsonl", '{"text": "say \\"hi\\"", "label": "a"}\n\n{"text": "b", "label": "b"}\n')
    d = load("--training-file", path, "--validation-file", twin(path))
    assert texts(d, "train") == ['say "hi"', "b"]


# --------------------------------------------------------------------------- labels name their rows


def rows_with_labels(labels):
    return "text,label\n" + "".join(f"text number {i},{label}\n" for i, label in enumerate(labels, start=1))


def test_a_rare_label_is_named_with_its_row_and_the_nearest_known_label(tmp_path):
    labels = ["positive", "negative", "neutral"] * 10
    labels[17] = "postive"
    path = write(tmp_path / "t.csv", rows_with_labels(labels))
    with pytest.raises(UserError) as e:
        load_with_defaults("--training-file", path)
    assert "t.csv: 'postive' (line 19), column 'label': did you mean 'positive'?" in str(e.value)
    assert "has 1 of 30 rows, fewer than --min-examples-per-class 5" in str(e.value)


def test_the_class_size_threshold_is_a_flag(tmp_path):
    labels = ["positive", "negative"] * 10 + ["rare"] * 3
    path = write(tmp_path / "t.csv", rows_with_labels(labels))
    with pytest.raises(UserError, match=r"'rare' \(lines 22, 23, 24\), column 'label': a typo\?"):
        load_with_defaults("--training-file", path)
    d = load_with_defaults("--training-file", path, "--min-examples-per-class", "3")
    assert d.labels.names == ["negative", "positive", "rare"]


def test_a_tiny_balanced_file_is_not_a_typo_and_trains(tmp_path):
    """4 rows of each of 3 classes: every class is below --min-examples-per-class 5 and none is
    rare against the others (issue #23, 3); the held-out validation gets one row per class."""
    path = write(tmp_path / "t.csv", rows_with_labels(["negative", "neutral", "positive"] * 4))
    d = load_with_defaults("--training-file", path)
    assert d.sizes() == {"train": 9, "validation": 3}
    assert sorted(d.validation.labels.tolist()) == [0, 1, 2]


def test_a_small_class_near_identical_to_another_label_is_a_typo_even_when_not_rare(tmp_path):
    labels = ["positive", "negative"] * 3 + ["Positive"] * 3
    path = write(tmp_path / "t.csv", rows_with_labels(labels))
    with pytest.raises(UserError, match=r"'Positive' \(lines 8, 9, 10\), column 'label': did you mean 'positive'\?"):
        load_with_defaults("--training-file", path)


def test_a_word_among_class_ids_is_blamed_at_its_own_row(tmp_path):
    labels = ["0", "1", "2"] * 10
    labels[17] = "two"
    path = write(tmp_path / "t.csv", rows_with_labels(labels))
    with pytest.raises(UserError, match=r"t.csv line 19, column 'label': label 'two' is not a number"):
        load_with_defaults("--training-file", path)


def test_class_counts_are_logged_with_names(tmp_path, caplog):
    path = write(tmp_path / "t.csv", rows_with_labels(["pos"] * 12 + ["neg"] * 6 + ["mid"] * 6))
    with caplog.at_level("INFO", logger="trainer"):
        d = load_with_defaults("--training-file", path, "--validation-file", twin(path))
    assert d.class_counts(task_registry.by_name("classification"))["train"] == {"mid": 6, "neg": 6, "pos": 12}
    assert "train classes: mid 6, neg 6, pos 12" in caplog.text
    assert "validation classes: mid 6, neg 6, pos 12" in caplog.text


def test_a_single_example_class_is_named_when_a_validation_split_is_carved(tmp_path):
    path = write(tmp_path / "t.csv", rows_with_labels(["pos", "neg"] * 5 + ["odd"]))
    with pytest.raises(UserError, match=r"class 'odd' has a single example"):
        load("--training-file", path)


# --------------------------------------------------------------------------- the small entry points


@pytest.mark.parametrize("module", ["trainer.predict", "trainer.prepare", "trainer.export_encoder"])
def test_help_imports_no_heavy_module_and_every_flag_has_help_and_its_default(module):
    """--help answers at once because it imports neither TensorFlow (3 s), pandas nor numpy."""
    import importlib
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": ROOT}
    code = (
        f"import runpy, sys\nsys.argv = ['x', '--help']\ntry:\n"
        f"    runpy.run_module('{module}', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"heavy = {{'tensorflow', 'pandas', 'numpy'}} & set(sys.modules)\nassert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    parser = importlib.import_module(
        {"trainer.predict": "trainer.serving.predict_file", "trainer.prepare": "trainer.data.preparation"}.get(
            module, module
        )
    ).build_arg_parser()
    for action in parser._actions:
        assert action.help, action.option_strings
        if action.default not in (None, False, "==SUPPRESS==") and not action.required:
            assert "default" in parser.formatter_class("x")._get_help_string(action).lower(), action.option_strings


# --------------------------------------------------------------------------- no class without rows (issue 37, 4)


def test_star_ratings_1_to_5_are_five_classes_and_the_log_says_why(tmp_path, caplog):
    path = write(tmp_path / "t.csv", rows_with_labels([1, 2, 3, 4, 5] * 4))
    with caplog.at_level("INFO", logger="trainer"):
        d = load("--training-file", path)
    assert d.labels.kind == "name" and d.labels.names == ["1", "2", "3", "4", "5"]
    assert "label column 'label': 5 class names (integers that do not run 0..K-1 are names" in caplog.text


def test_integers_from_0_are_class_ids_and_the_log_says_so(tmp_path, caplog):
    path = write(tmp_path / "t.csv", rows_with_labels([0, 1, 2] * 4))
    with caplog.at_level("INFO", logger="trainer"):
        d = load("--training-file", path)
    assert d.labels.kind == "index" and d.labels.names == ["0", "1", "2"]
    assert "label column 'label': class ids 0..2 (integers from 0): 0, 1, 2" in caplog.text


@pytest.mark.parametrize(
    "labels, flags, expected",
    [
        (
            [1, 2, 3] * 4,
            ["--label-type", "index"],
            "class '0' of column 'label' has no rows in the training data; class ids must run 0..K-1",
        ),
        (
            [0, 1] * 4,
            ["--label-names", "a,b,c"],
            "class 'c' of column 'label' has no rows in the training data; drop it from --label-names",
        ),
        (["a", "b"] * 4, ["--label-names", "a,b,c"], "class 'c' of column 'label' has no rows"),
        (
            [-0.5, 0.5] * 4,
            [],
            "class 'neutral' of column 'label' has no rows in the training data; "
            "scores only on one side of 0 or none at 0",
        ),
    ],
)
def test_a_class_without_training_rows_is_refused(tmp_path, labels, flags, expected):
    path = write(tmp_path / "t.csv", rows_with_labels(labels))
    with pytest.raises(UserError, match="t.csv: ") as e:
        load("--training-file", path, *flags)
    assert expected in str(e.value)


# --------------------------------------------------------------------------- one label, one spelling (issue 37, 5)


def test_labels_that_differ_only_in_case_are_refused_naming_both_and_their_counts(tmp_path):
    path = write(tmp_path / "t.csv", rows_with_labels(["positive"] * 7 + ["Positive"] * 6 + ["negative"] * 8))
    with pytest.raises(UserError) as e:
        load_with_defaults("--training-file", path)
    assert str(e.value).endswith(
        "t.csv: labels 'Positive' (6 rows, first on line 9) and 'positive' (7 rows, first on line 2), "
        "column 'label', differ only in case or Unicode normalization: make them one label, or pass "
        "--allow-label-variants to keep two classes"
    )


def test_labels_that_differ_only_in_unicode_normalization_are_refused(tmp_path):
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    path = write(tmp_path / "t.csv", rows_with_labels([nfc] * 5 + [nfd] * 5 + ["bar"] * 5))
    with pytest.raises(UserError, match="differ only in case or Unicode normalization"):
        load_with_defaults("--training-file", path)


def test_allow_label_variants_keeps_them_as_two_classes(tmp_path):
    path = write(tmp_path / "t.csv", rows_with_labels(["positive"] * 7 + ["Positive"] * 6 + ["negative"] * 8))
    d = load_with_defaults("--training-file", path, "--allow-label-variants")
    assert d.labels.names == ["Positive", "negative", "positive"]


def test_a_validation_label_in_another_case_suggests_the_training_label(tmp_path):
    train = write(tmp_path / "t.csv", "text,label\na,pos\nb,neg\n")
    val = write(tmp_path / "v.csv", "text,label\nc,POS\n")
    with pytest.raises(
        UserError,
        match=r"v.csv line 2, column 'label': label 'POS' never appears "
        r"in the training data .*; did you mean 'pos'\?",
    ):
        load("--training-file", train, "--validation-file", val)


# --------------------------------------------------------------------------- one rule for column names (issue 37, 6)


def test_columns_are_matched_by_one_rule_in_every_file(tmp_path):
    train = write(tmp_path / "t.csv", "Text,Label\na,pos\nb,neg\n")
    val = write(tmp_path / "v.csv", "text,label\nc,pos\nd,neg\n")
    test = write(tmp_path / "x.csv", '" Text ",  LABEL \ne,pos\nf,neg\n')
    d = load("--training-file", train, "--validation-file", val, "--testing-file", test)
    assert (d.text_column, d.label_column) == ("Text", "Label")
    assert texts(d, "validation") == ["c", "d"] and texts(d, "test") == ["e", "f"]
    assert d.test.labels.tolist() == [1, 0]


def test_a_named_column_is_found_whatever_its_case_and_surrounding_spaces(tmp_path):
    path = write(tmp_path / "t.csv", '" Body ",label\na,pos\nb,neg\n')
    val = write(tmp_path / "v.csv", "BODY,label\nc,pos\n")
    d = load("--training-file", path, "--validation-file", val, "--text-column", "body")
    assert d.text_column == " Body " and texts(d, "train") == ["a", "b"]
    assert texts(d, "validation") == ["c"]


def test_header_cells_that_differ_only_in_case_are_refused(tmp_path):
    path = write(tmp_path / "t.csv", "text,Text,label\na,b,pos\n")
    with pytest.raises(
        UserError,
        match=r"t.csv line 1: columns 'text' and 'Text' are one column "
        r"to this trainer",
    ):
        load("--training-file", path)


# --------------------------------------------------------------------------- leakage between splits (issue 37, 9)


def test_a_validation_file_that_is_the_training_file_is_refused(tmp_path):
    path = write(tmp_path / "t.csv", rows_with_labels(["a", "b"] * 3))
    with pytest.raises(
        UserError,
        match=r"^--validation-file: .*t.csv is the training file .*t.csv: "
        r"every score on it would be measured on rows the model "
        r"trained on",
    ):
        load("--training-file", path, "--validation-file", path)


def test_a_test_file_that_is_a_copy_of_the_training_file_is_refused(tmp_path):
    path = write(tmp_path / "t.csv", rows_with_labels(["a", "b"] * 3))
    copy = write(tmp_path / "copy.csv", pathlib.Path(path).read_bytes())
    with pytest.raises(
        UserError,
        match=r"^--testing-file: .*copy.csv has the same content as the "
        r"training file .*t.csv",
    ):
        load("--training-file", path, "--testing-file", copy)


def test_texts_a_held_out_split_shares_with_train_are_counted_in_the_log(tmp_path, caplog):
    train = write(tmp_path / "t.csv", "text,label\none,a\ntwo,b\nthree,a\nfour,b\n")
    val = write(tmp_path / "v.csv", "text,label\none,a\nfive,b\nfour,a\n")
    with caplog.at_level("INFO", logger="trainer"):
        load("--training-file", train, "--validation-file", val)
    assert (
        "overlap: 2 of 3 validation rows repeat a training text exactly; their scores "
        "overstate what the model does on new texts"
    ) in caplog.text
