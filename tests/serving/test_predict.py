"""`python -m trainer.predict` and training read a file the same way: one row per line of a TSV
whose texts hold quotes, one output row per input row, progress lines while it runs."""

import csv
import json
import logging
import os
import subprocess
import sys

import pytest
from conftest import labelled_rows, without_extras
from test_task import run_in_process

QUOTES = ['"{}"', '{} "so" good', 'he said "{}', '{}"', '""{}""', "{}"]


def quoted_tweets(count, seed):
    """(text, label) rows whose texts hold `"` the way tweets do: paired, unpaired, doubled."""
    return [(QUOTES[i % len(QUOTES)].format(text), label) for i, (text, label) in enumerate(labelled_rows(count, seed))]


def write_tsv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("tweet\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
    return str(path)


def run_cli(module, *args):
    env = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")}
    return subprocess.run(
        [sys.executable, "-m", module, *without_extras(module, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def tsv_run(tiny_encoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("tsv")
    files = {
        name: write_tsv(root / f"{name}.tsv", quoted_tweets(count, seed))
        for name, count, seed in (("train", 90, 1), ("validation", 30, 2), ("test", 301, 3))
    }
    job_dir = root / "job"
    result = run_cli(
        "trainer.task",
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        files["train"],
        "--validation-file",
        files["validation"],
        "--job-dir",
        job_dir,
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return files, job_dir, result


def test_training_reads_every_tsv_line_as_one_row(tsv_run):
    _, job_dir, result = tsv_run
    metrics = json.loads((job_dir / "metrics.json").read_text())
    assert metrics["dataset_sizes"]["train"] == 90 and metrics["dataset_sizes"]["validation"] == 30
    assert "train classes: negative 30, neutral 30, positive 30" in result.stdout


@pytest.mark.parametrize(
    "suffix", ["tsv", pytest.param("csv", marks=pytest.mark.slow), pytest.param("jsonl", marks=pytest.mark.slow)]
)
def test_predict_writes_one_row_per_tsv_line_with_the_text_unchanged(tsv_run, tmp_path, suffix):
    files, job_dir, _ = tsv_run
    output = tmp_path / f"predictions.{suffix}"
    result = run_cli(
        "trainer.predict",
        "--model-dir",
        job_dir / "model",
        "--input",
        files["test"],
        "--output",
        output,
        "--batch-size",
        "32",
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 301 rows with predictions" in result.stdout
    with open(output, encoding="utf-8", newline="") as f:
        if suffix == "jsonl":
            rows = [json.loads(line) for line in f]
        else:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if suffix == "tsv" else csv.DictReader(f)
            rows = list(reader)
    assert [r["tweet"] for r in rows] == [text for text, _ in quoted_tweets(301, 3)]
    assert all(r["predicted_label"] in ("negative", "neutral", "positive") for r in rows)


@pytest.mark.slow  # a fresh process for it, by hand (.ci/run's BY_HAND)
def test_predict_logs_progress_with_rows_per_second(tsv_run, tmp_path):
    files, job_dir, _ = tsv_run
    result = run_cli(
        "trainer.predict",
        "--model-dir",
        job_dir / "model",
        "--input",
        files["test"],
        "--output",
        tmp_path / "p.csv",
        "--log-every-seconds",
        "0.000001",
    )
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if " predicted 301 rows (100%)" in line]
    assert len(progress) == 1 and " rows/s  ETA 0s" in progress[0]


def test_the_output_file_gets_the_mode_of_a_new_file_under_the_umask(tsv_run, tmp_path):
    """tempfile creates 0600: the renamed output must be 0644 under umask 022 (issue #23, 1)."""
    files, job_dir, _ = tsv_run
    previous = os.umask(0o022)
    try:
        result = run_in_process(
            "--model-dir",
            job_dir / "model",
            "--input",
            files["validation"],
            "--output",
            tmp_path / "p.csv",
            module="trainer.predict",
        )
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    assert oct((tmp_path / "p.csv").stat().st_mode & 0o777) == oct(0o644)


def test_a_text_tsv_cannot_hold_is_refused_not_mangled(tsv_run, tmp_path):
    _, job_dir, _ = tsv_run
    source = tmp_path / "in.csv"
    source.write_text('tweet,label\n"two\nlines",positive\n', encoding="utf-8")
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", source, "--output", tmp_path / "out.tsv", module="trainer.predict"
    )
    assert result.returncode == 2 and "holds a tab or a line break, which TSV cannot hold" in result.stderr
    assert not (tmp_path / "out.tsv").exists()


def test_a_broken_input_line_is_named(tsv_run, tmp_path):
    _, job_dir, _ = tsv_run
    source = tmp_path / "in.tsv"
    source.write_text("tweet\tlabel\nfine\tpositive\nextra\ttab\there\n", encoding="utf-8")
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", source, "--output", tmp_path / "out.csv", module="trainer.predict"
    )
    assert result.returncode == 2 and "in.tsv line 3 holds 3 fields, the header 2" in result.stderr
    assert "Traceback" not in result.stderr


def test_batches_hold_rows_of_one_ladder_length_each_and_every_row_once():
    import numpy as np

    from trainer.inference.loaded_model import token_batches

    lengths = np.array([3, 40, 17, 16, 64, 5, 21, 33, 16, 2])
    mask = (np.arange(64)[None, :] < lengths[:, None]).astype(np.int32)
    features = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": 0 * mask}
    batches = list(token_batches(features, batch_size=2))
    rows = np.concatenate([r for r, _ in batches])
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    for batch_rows, batch in batches:
        width = batch["input_mask"].shape[1]
        assert width in (8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64) and len(batch_rows) <= 2
        assert (lengths[batch_rows] <= width).all()  # nothing cut
        assert (lengths[batch_rows] > {8: 0, 16: 12, 20: 16, 24: 20, 36: 32, 40: 36, 64: 56}[width]).all()
        np.testing.assert_array_equal(batch["input_mask"], mask[batch_rows, :width])


def signature_probabilities(model_dir, texts):
    """What the exported signature itself returns for `texts`, one model call."""
    import tensorflow as tf

    from trainer.serving import export

    return export.load(str(model_dir))(text=tf.constant(texts))["probabilities"].numpy()


def predicted_probabilities(path):
    rows = list(csv.DictReader(open(path, encoding="utf-8", newline="")))
    return rows, [[float(r[f"probability_{name}"]) for name in ("negative", "neutral", "positive")] for r in rows]


def test_predict_writes_the_signatures_probabilities_in_input_order(tsv_run, tmp_path):
    import numpy as np

    files, job_dir, _ = tsv_run
    result = run_cli(
        "trainer.predict",
        "--model-dir",
        job_dir / "model",
        "--input",
        files["test"],
        "--output",
        tmp_path / "p.csv",
        "--batch-size",
        "7",
    )
    assert result.returncode == 0, result.stderr
    rows, probabilities = predicted_probabilities(tmp_path / "p.csv")
    texts = [r["tweet"] for r in rows]
    np.testing.assert_allclose(probabilities, signature_probabilities(job_dir / "model", texts), atol=1e-5)


@pytest.mark.slow
def test_an_export_with_only_its_signature_predicts_the_same(tsv_run, tmp_path):
    """Models exported before `tokenize` / `predict_tokens` existed still predict."""
    import numpy as np
    import tensorflow as tf

    from trainer.serving import export

    files, job_dir, _ = tsv_run
    loaded = export.load_module(str(job_dir / "model"))
    only_signature = tf.Module()
    only_signature.inner = loaded  # tracks the variables and the vocabulary table
    tf.saved_model.save(
        only_signature, str(tmp_path / "old"), signatures={export.SIGNATURE: loaded.signatures[export.SIGNATURE]}
    )
    assert not hasattr(tf.saved_model.load(str(tmp_path / "old")), "tokenize")
    outputs = {}
    for name, model_dir in (("old", tmp_path / "old"), ("new", job_dir / "model")):
        result = run_cli(
            "trainer.predict", "--model-dir", model_dir, "--input", files["test"], "--output", tmp_path / f"{name}.csv"
        )
        assert result.returncode == 0, result.stderr
        outputs[name] = predicted_probabilities(tmp_path / f"{name}.csv")
    assert [r["tweet"] for r in outputs["old"][0]] == [r["tweet"] for r in outputs["new"][0]]
    np.testing.assert_allclose(outputs["old"][1], outputs["new"][1], atol=1e-5)


# --- issue 37: an unwritable --output, empty texts, the model's own columns -----------------------


def test_an_output_under_a_file_is_one_line_before_the_model_loads(tsv_run, tmp_path):
    """Issue #37, 7: a traceback and exit 1, after the model had loaded."""
    files, job_dir, _ = tsv_run
    (tmp_path / "taken").write_text("a file\n")
    output = tmp_path / "taken" / "out.csv"
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", files["validation"], "--output", output, module="trainer.predict"
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: --output: cannot write {output}: {tmp_path / 'taken'} is a file, not a directory"
    ]


def test_a_classifiers_npy_output_is_one_line_and_leaves_no_file(tsv_run, tmp_path):
    """.npy holds an embedding model's vectors (tests/tasks/embedding): a classifier has none."""
    files, job_dir, _ = tsv_run
    output = tmp_path / "out.npy"
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", files["validation"], "--output", output, module="trainer.predict"
    )
    assert result.returncode == 2 and not list(tmp_path.iterdir())
    assert result.stderr.splitlines()[-1].startswith(f"error: --output: {output}: a .npy output holds vectors")


def test_a_compressed_npy_output_is_one_line_before_the_model_loads(tsv_run, tmp_path):
    files, job_dir, _ = tsv_run
    output = tmp_path / "out.npy.gz"
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", files["validation"], "--output", output, module="trainer.predict"
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: --output: {output}: a .npy output is written uncompressed (numpy.load reads it so)"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_output_in_a_read_only_directory_is_one_line_before_the_model_loads(tsv_run, tmp_path):
    files, job_dir, _ = tsv_run
    (tmp_path / "locked").mkdir(mode=0o555)
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        files["validation"],
        "--output",
        tmp_path / "locked" / "out.csv",
        module="trainer.predict",
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(
        f"error: --output: cannot write {tmp_path / 'locked' / 'out.csv'}: Permission denied"
    )


def test_an_empty_text_gets_no_label_but_a_note_and_a_count_in_the_log(tsv_run, tmp_path):
    """Issue #37, 8: an empty text was labelled `neutral 0.997`; training refuses such rows."""
    _, job_dir, _ = tsv_run
    source = write_tsv(tmp_path / "in.tsv", [("so good", "positive"), ("", "neutral"), ("  ", "neutral")])
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        source,
        "--output",
        tmp_path / "out.jsonl",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    assert "2 of 3 rows have an empty text: no prediction, and the note column says so" in result.stdout
    rows = [json.loads(line) for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    assert rows[0]["predicted_label"] in ("negative", "neutral", "positive") and rows[0]["note"] == ""
    for row in rows[1:]:
        assert row["predicted_label"] is None and row["note"] == "empty text: no prediction"
        assert [row[f"probability_{n}"] for n in ("negative", "neutral", "positive")] == [None] * 3


def test_a_row_is_empty_when_its_text_or_its_pair_is_blank():
    from trainer.inference.loaded_model import empty_rows

    assert empty_rows(["a", "", " \t", "b"]).tolist() == [False, True, True, False]
    assert empty_rows(["a", "", "c"], ["x", "y", "\n"]).tolist() == [False, True, True]


def test_a_pair_model_reads_its_own_columns_when_the_file_holds_them():
    """Issue #37, 12: a model trained on question/answer needed both flags again."""
    import argparse

    import pandas as pd

    from trainer.serving.predict_file import text_columns

    chunk = pd.DataFrame({"id": [1], "question": ["q"], "answer": ["a"], "_file": ["in.csv"]})
    no_flags = argparse.Namespace(text_column=None, text_pair_column=None)
    assert text_columns(chunk, no_flags, True, ("question", "answer")) == ("question", "answer")
    flagged = argparse.Namespace(text_column="answer", text_pair_column="question")
    assert text_columns(chunk, flagged, True, ("question", "answer")) == ("answer", "question")


def test_a_column_the_file_lacks_falls_back_to_the_trainers_detection():
    import argparse

    import pandas as pd

    from trainer.serving.predict_file import text_columns

    chunk = pd.DataFrame({"sentence": ["s"], "_file": ["in.csv"]})
    no_flags = argparse.Namespace(text_column=None, text_pair_column=None)
    assert text_columns(chunk, no_flags, False, ("tweet", None)) == ("sentence", None)


def test_the_model_columns_are_the_ones_its_run_recorded(tsv_run, tmp_path):
    from trainer.serving.columns import model_columns

    _, job_dir, _ = tsv_run
    assert model_columns(str(job_dir / "model")) == ("tweet", None)
    assert model_columns(str(job_dir / "model") + "/") == ("tweet", None)
    (tmp_path / "model").mkdir()  # a model dir copied without its job dir
    assert model_columns(str(tmp_path / "model")) == (None, None)


def test_predict_reads_a_gzip_semicolon_csv_with_delimiter(tsv_run, tmp_path):
    """Issue 37, 13: a .csv.gz, and a CSV saved by Excel in a European locale."""
    import gzip

    _, job_dir, _ = tsv_run
    source = tmp_path / "in.csv.gz"
    source.write_bytes(gzip.compress(b"tweet;id\nso good, really;1\nawful;2\n"))
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        source,
        "--delimiter",
        ";",
        "--output",
        tmp_path / "out.csv",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["tweet"], r["id"]) for r in rows] == [("so good, really", "1"), ("awful", "2")]


def test_the_model_columns_are_found_by_the_trainers_one_rule_for_names():
    """Issue 37, 6: a model trained on `Question`/`Answer` reads a file headed ` question `,`answer`."""
    import argparse

    import pandas as pd

    from trainer.serving.predict_file import text_columns

    chunk = pd.DataFrame({" question ": ["q"], "answer": ["a"], "_file": ["in.csv"]})
    no_flags = argparse.Namespace(text_column=None, text_pair_column=None)
    assert text_columns(chunk, no_flags, True, ("Question", "Answer")) == (" question ", "answer")


# --- issue 49, 6: --output as a JSON array, and gzip-compressed -----------------------------------


def predict_to(job_dir, source, output):
    result = run_in_process(
        "--model-dir", job_dir / "model", "--input", source, "--output", output, module="trainer.predict"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_a_json_output_is_one_array_of_the_rows_json_lines_holds(tsv_run, tmp_path):
    """A .json --output was JSON Lines, which json.load refuses."""
    files, job_dir, _ = tsv_run
    for name in ("out.json", "out.jsonl"):
        predict_to(job_dir, files["validation"], tmp_path / name)
    with open(tmp_path / "out.json", encoding="utf-8") as f:
        array = json.load(f)
    with open(tmp_path / "out.jsonl", encoding="utf-8") as f:
        assert array == [json.loads(line) for line in f]
    assert [row["tweet"] for row in array] == [text for text, _ in quoted_tweets(30, 2)]


def read_gzip(path, fmt):
    """`path`'s rows as dicts, read by gzip and the standard library (not by the trainer)."""
    import gzip

    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        if fmt == "json":
            return json.load(f)
        if fmt == "jsonl":
            return [json.loads(line) for line in f]
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if fmt == "tsv" else csv.DictReader(f))


@pytest.mark.parametrize(
    "fmt", ["csv", "json", pytest.param("tsv", marks=pytest.mark.slow), pytest.param("jsonl", marks=pytest.mark.slow)]
)
def test_a_gz_output_is_that_format_gzip_compressed(tsv_run, tmp_path, fmt):
    """.gz was read on --input but refused on --output."""
    files, job_dir, _ = tsv_run
    output = tmp_path / f"out.{fmt}.gz"
    assert "wrote 30 rows with predictions" in predict_to(job_dir, files["validation"], output).stdout
    rows = read_gzip(output, fmt)
    assert [row["tweet"] for row in rows] == [text for text, _ in quoted_tweets(30, 2)]
    assert all(row["predicted_label"] in ("negative", "neutral", "positive") for row in rows)
    assert os.listdir(tmp_path) == [output.name]  # renamed into place, no temporary file left


def test_a_gz_output_that_fails_leaves_no_file(tsv_run, tmp_path):
    _, job_dir, _ = tsv_run
    source = tmp_path / "in.csv"
    source.write_text('tweet,label\nfine,positive\n"two\nlines",positive\n', encoding="utf-8")
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        source,
        "--output",
        tmp_path / "out.tsv.gz",
        module="trainer.predict",
    )
    assert result.returncode == 2 and "holds a tab or a line break, which TSV cannot hold" in result.stderr
    assert os.listdir(tmp_path) == ["in.csv"]


def test_an_output_extension_it_cannot_write_is_one_line_naming_the_ones_it_can(tmp_path):
    output = tmp_path / "out.parquet"
    result = run_in_process(
        "--model-dir", tmp_path, "--input", tmp_path / "in.csv", "--output", output, module="trainer.predict"
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: --output: cannot tell the format of {output} from its extension '.parquet'; use one of "
        f".csv, .json, .jsonl, .ndjson, .tsv, each optionally followed by .gz"
    ]


def test_explain_writes_a_gzip_json_array_and_its_page_beside_it(tsv_run, tmp_path):
    """trainer.explain writes its --output as trainer.predict does."""
    _, job_dir, _ = tsv_run
    source = write_tsv(tmp_path / "in.tsv", [("so good", "positive"), ("awful", "negative")])
    result = run_in_process(
        "--model-dir",
        job_dir / "model",
        "--input",
        source,
        "--output",
        tmp_path / "out.json.gz",
        "--top-k",
        "1",
        "--ig-steps",
        "4",
        module="trainer.explain",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = read_gzip(tmp_path / "out.json.gz", "json")
    assert [row["tweet"] for row in rows] == ["so good", "awful"]
    assert all(isinstance(row["top_words"], list) and len(row["top_words"]) == 1 for row in rows)
    assert (tmp_path / "out.html").exists()


def model_dir_with_copies(tmp_path, checks):
    """A model dir whose precisions.json holds `checks`, with each passed copy's marker file (the
    float32 model's saved_model.pb is empty: nothing here loads it)."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "saved_model.pb").write_bytes(b"")
    (model_dir / "precisions.json").write_text(json.dumps(checks))
    markers = {"int8": "model.tflite", "bfloat16": "saved_model.pb"}
    for precision in (p for p, check in checks.items() if check.get("passed")):
        (model_dir / precision).mkdir()
        (model_dir / precision / markers[precision]).write_bytes(b"")
    return model_dir


def test_predict_asked_for_a_copy_its_check_refused_says_so_instead_of_naming_a_command(tmp_path):
    """Issue #64: the hint named trainer.export_quantized, which would refuse the copy again."""
    why = "entities agree with float32 at 96.41% F1 on 30 validation rows (needs 99%)"
    model_dir = model_dir_with_copies(tmp_path, {"int8": {"written": False, "passed": False, "why": why}})
    source = write_tsv(tmp_path / "in.tsv", [("so good", "positive")])
    result = run_in_process(
        "--model-dir",
        model_dir,
        "--input",
        source,
        "--output",
        tmp_path / "out.csv",
        "--precision",
        "int8",
        module="trainer.predict",
    )
    assert result.returncode == 2 and not (tmp_path / "out.csv").exists()
    assert result.stderr.splitlines() == [
        f"error: --precision int8: {model_dir} holds no int8 model (it holds float32); its check "
        f"refused it, not written: {why}"
    ]


@pytest.mark.parametrize("speedup, expected", [(0.99, "float32"), (1.96, "int8")])
def test_precision_auto_loads_the_int8_copy_only_where_its_check_timed_it_faster(tmp_path, caplog, speedup, expected):
    """Issue #64: `--precision auto` loaded an int8 copy its check timed at 0.99x float32."""
    from trainer.serving import variants

    model_dir = model_dir_with_copies(tmp_path, {"int8": {"written": True, "passed": True, "speedup": speedup}})
    with caplog.at_level(logging.INFO, logger="trainer"):
        precision, _ = variants.resolve(str(model_dir), "auto", cpuinfo_text="")
    assert precision == expected
    assert (
        f"--precision auto: {expected}: the int8 copy measured {speedup:.2f}x float32's speed at export" in caplog.text
    )


def test_a_file_without_the_models_text_column_is_one_line_before_the_model_loads(tsv_run, tmp_path):
    """Issue #64: the model loaded for 11 s before the missing text column was found. The
    columns are checked against its signature, read without loading it."""
    from unittest import mock

    _, job_dir, _ = tsv_run
    source = tmp_path / "in.csv"
    source.write_text("body,label\nso good,positive\n")
    with mock.patch("trainer.serving.variants.load", side_effect=AssertionError("the model loaded")):
        result = run_in_process(
            "--model-dir",
            job_dir / "model",
            "--input",
            source,
            "--output",
            tmp_path / "out.csv",
            module="trainer.predict",
        )
    assert result.returncode == 2 and "loaded" not in result.stdout
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"error: {source}: ")
    assert "--text-column" in result.stderr and not (tmp_path / "out.csv").exists()
