"""Input files as people have them (issue 37, 13): gzip-compressed, a JSON array, a CSV with
another separator, UTF-16; and line numbers in errors as an editor shows them."""

import gzip

import pytest

from trainer import config as config_lib
from trainer import reading
from trainer.data import splits
from trainer.errors import UserError

ROWS = "text,label\none,a\ntwo,b\nthree,a\n"


def write(path, data):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


def load(*argv):
    return splits.load_datasets(config_lib.build_config(["--min-examples-per-class", "1", *argv], {}))


def train_texts(*argv):
    d = load(*argv)
    return d.read_texts("train")["train"][0].tolist(), [d.labels.names[i] for i in d.train.labels]


def validation(tmp_path):
    return write(tmp_path / "validation.csv", "text,label\nfour,a\nfive,b\n")


@pytest.mark.parametrize(
    "name, content",
    [
        ("t.csv.gz", ROWS),
        ("t.tsv.gz", ROWS.replace(",", "\t")),
        (
            "t.jsonl.gz",
            '{"text": "one", "label": "a"}\n{"text": "two", "label": "b"}\n{"text": "three", "label": "a"}\n',
        ),
    ],
)
def test_gzip_compressed_files_are_read_by_their_inner_extension(tmp_path, name, content):
    path = write(tmp_path / name, gzip.compress(content.encode()))
    assert train_texts("--training-file", path, "--validation-file", validation(tmp_path)) == (
        ["one", "two", "three"],
        ["a", "b", "a"],
    )


def test_a_gzip_file_is_read_as_a_stream_in_chunks(tmp_path):
    lines = "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(10))
    path = write(tmp_path / "t.csv.gz", gzip.compress(("text,label\n" + lines).encode()))
    frames = list(reading.file_frames(path, "--input", chunk_rows=4))
    assert [len(f) for f in frames] == [4, 4, 2]
    assert frames[2]["_row"].tolist() == [10, 11]


def test_a_truncated_gzip_file_is_named(tmp_path):
    data = gzip.compress(("text,label\n" + "some text,a\n" * 500).encode())
    path = write(tmp_path / "t.csv.gz", data[: len(data) // 2])
    with pytest.raises(UserError, match=r"t.csv.gz: cannot decompress it as gzip"):
        load("--training-file", path)


def test_a_json_array_of_objects_is_read_with_the_line_of_each_element(tmp_path):
    path = write(
        tmp_path / "t.json",
        '[\n  {"text": "one", "label": "a"},\n  {"text": "two",\n'
        '   "label": "b"},\n  {"text": "three", "label": null}\n]\n',
    )
    frame = reading.read_table(path, "--training-file")
    assert frame["text"].tolist() == ["one", "two", "three"] and frame["_row"].tolist() == [2, 3, 5]
    with pytest.raises(UserError, match=r"t.json line 5, column 'label': label is missing"):
        load("--training-file", path)


@pytest.mark.parametrize(
    "content, expected",
    [
        ('[{"text": "a"},\n "b"]', r"line 2: element 2 of the JSON array is not a JSON object"),
        ('[{"text": "a"}\n {"text": "b"}]', r"line 2 is not valid JSON \(expecting ',' or ']'"),
        ('[{"text": "a"},\n\n {"text": }]', r"line 3 is not valid JSON \(Expecting value\)"),
    ],
)
def test_a_broken_json_array_names_the_line(tmp_path, content, expected):
    path = write(tmp_path / "t.json", content)
    with pytest.raises(UserError, match="t.json " + expected):
        reading.read_table(path, "--input")


def test_a_semicolon_csv_is_recognized_and_the_error_says_how_to_read_it(tmp_path):
    path = write(tmp_path / "t.csv", "text;label\nun, deux;a\ntrois;b\n")
    with pytest.raises(UserError) as e:
        load("--training-file", path)
    assert str(e.value) == (
        f"{path} line 1: the header 'text;label' is separated by semicolons, "
        f"not ',': a CSV saved by Excel in a European locale? pass --delimiter ';'"
    )


def test_delimiter_reads_a_semicolon_csv(tmp_path):
    path = write(tmp_path / "t.csv", 'text;label\nun, deux;a\n"trois; quatre";b\n')
    val = write(tmp_path / "v.csv", "text;label\ncinq;a\n")
    assert train_texts("--training-file", path, "--validation-file", val, "--delimiter", ";") == (
        ["un, deux", "trois; quatre"],
        ["a", "b"],
    )


def test_a_delimiter_of_more_than_one_character_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"^--delimiter: must be one character .*, got ';;'"):
        load("--training-file", write(tmp_path / "t.csv", ROWS), "--delimiter", ";;")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_file_gets_a_hint(tmp_path, encoding):
    path = write(tmp_path / "t.csv", ROWS.encode(encoding))
    with pytest.raises(UserError, match=r"t.csv line 1 looks like UTF-16 .* save the file as UTF-8"):
        load("--training-file", path)


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("t.csv", 'text,label\n"two\nlines",a\n\nok,\n', "t.csv line 5, column 'label': label is missing"),
        (
            "t.jsonl",
            '{"text": "a", "label": "x"}\n\n{"text": "b", "label": ""}\n',
            "t.jsonl line 3, column 'label': label is missing",
        ),
    ],
)
def test_errors_name_the_line_an_editor_shows(tmp_path, name, content, expected):
    with pytest.raises(UserError) as e:
        load("--training-file", write(tmp_path / name, content))
    assert expected in str(e.value)


# --------------------------------------------------------------------------- tagged files named otherwise (issue 64, 5)

CONLL = "EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n"


def test_a_txt_training_file_names_the_task_that_reads_it_as_conll(tmp_path):
    path = write(tmp_path / "train.txt", CONLL)
    with pytest.raises(UserError) as e:
        config_lib.build_config(["--training-file", path], {})
    assert str(e.value) == (
        f"--training-file: cannot tell the format of {path} from its extension "
        f"'.txt'; a .txt of a token and its tag per line (CoNLL) is read with "
        f"--task token-classification, or name it .conll; a table of texts and "
        f"labels is one of .csv, .json, .jsonl, .ndjson, .tsv"
    )


def test_an_unknown_extension_lists_every_one_read_tagged_files_included(tmp_path):
    with pytest.raises(
        UserError,
        match=r"^--training-file: cannot tell the format of .*t.xls from its "
        r"extension '.xls'; use one of .csv, .json, .jsonl, .ndjson, "
        r".tsv \(a table of texts and labels\) or .conll, .iob "
        r"\(tagged sentences, CoNLL\), each optionally followed by .gz",
    ):
        config_lib.build_config(["--training-file", write(tmp_path / "t.xls", ROWS)], {})


def test_a_tsv_that_looks_like_conll_says_how_to_read_it(tmp_path):
    """Not "no text column found": its first line is a token and its tag, not a header."""
    path = write(tmp_path / "train.tsv", "-DOCSTART-\tO\n\n" + CONLL)
    with pytest.raises(UserError) as e:
        config_lib.build_config(["--training-file", path], {})
    assert str(e.value) == (
        f"--training-file: {path} looks like CoNLL, not a table: line 3 is a "
        f"token and its tag ('EU\\tB-ORG') where a table has its header; name it "
        f".conll, or pass --task token-classification to read it as CoNLL"
    )
    table = write(tmp_path / "table.tsv", "text\tlabel\nEU rejects\tO\n")
    assert config_lib.build_config(["--training-file", table], {}).model.task == "auto"  # a table


def test_a_conll_file_given_to_a_task_of_tables_names_the_task_that_reads_it(tmp_path):
    path = write(tmp_path / "train.conll", CONLL)
    with pytest.raises(
        UserError,
        match=r"^--training-file: .*train.conll is a CoNLL file of tagged "
        r"sentences by its extension, which --task token-classification "
        r"\(or auto\) trains on; a table of texts is read here: use "
        r"one of .csv, .json, .jsonl, .ndjson, .tsv",
    ):
        load("--training-file", path, "--task", "classification")


GS_SCRIPT = """
import json
from trainer import reading
from trainer.data import leakage
from trainer.errors import UserError
frames = list(reading.file_frames("gs://BUCKET/data/t.csv.gz", "--training-file", chunk_rows=2))
out = {"texts": [t for f in frames for t in f["text"]], "lines": [r for f in frames for r in f["_row"]]}
try:
    leakage.check_held_out_files("gs://BUCKET/data/t.csv.gz", {"--validation-file": "gs://BUCKET/data/copy.csv.gz"})
except UserError as e:
    out["copy"] = str(e)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow  # ~15 s (the emulator and a TensorFlow process) for one read path
def test_a_gzip_file_on_gs_is_streamed_and_a_copy_of_it_is_refused(tmp_path_factory):
    """Through TensorFlow's own GCS client, against the local emulator (tests/helpers/gcs_emulator.py)."""
    import json
    import os
    import subprocess
    import sys

    from gcs_emulator import GcsEmulator

    data = gzip.compress(ROWS.encode())
    emulator = GcsEmulator(tmp_path_factory.mktemp("gcs"), bucket="vbt-formats").start()
    try:
        emulator.put("data/t.csv.gz", data)
        emulator.put("data/copy.csv.gz", data)
        from conftest import ROOT

        result = subprocess.run(
            [sys.executable, "-c", GS_SCRIPT.replace("BUCKET", "vbt-formats")],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=ROOT,
            env={**os.environ, **emulator.env},
        )
        assert emulator.refused == [], emulator.refused
    finally:
        emulator.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert out["texts"] == ["one", "two", "three"] and out["lines"] == [2, 3, 4]
    assert out["copy"].startswith(
        "--validation-file: gs://vbt-formats/data/copy.csv.gz has the same "
        "content as the training file gs://vbt-formats/data/t.csv.gz"
    )
