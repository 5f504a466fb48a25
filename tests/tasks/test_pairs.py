"""Sentence pairs: detected columns, `[CLS] a [SEP] b [SEP]` packing, and a pair classifier end
to end through the CLI, export and `trainer.predict`.

The tiny task's label is the sentiment of the *second* text (the first is random), so a model
that ignored `text_pair` would be at chance.
"""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_TASK_FLAGS, labelled_rows, metrics_of, read_csv, write_csv
from test_resume import kill_after_second_epoch
from test_task import run_cli, run_in_process

HEADER = ("sentence1", "sentence2", "label")


def pair_rows(count, seed):
    rng = random.Random(seed)
    firsts = [text for text, _ in labelled_rows(count, seed + 100)]
    return [(rng.choice(firsts), text, label) for text, label in labelled_rows(count, seed)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair_data")
    return {
        name: write_csv(root / f"{name}.csv", pair_rows(count, seed), HEADER)
        for name, count, seed in (("train", 120, 1), ("validation", 30, 2), ("test", 30, 3))
    }


def args(tiny_encoder_dir, data, job_dir, *extra):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        data["train"],
        "--validation-file",
        data["validation"],
        "--testing-file",
        data["test"],
        "--job-dir",
        job_dir,
        "--epochs",
        "6",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "24",
        "--mixed-precision",
        "off",
        *TINY_TASK_FLAGS,
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, data, tmp_path_factory):
    """A pair classifier, with --long-texts head-tail (issue #49, 2: it crashed on pairs)."""
    job_dir = tmp_path_factory.mktemp("pairs") / "job"
    result = run_cli(*args(tiny_encoder_dir, data, job_dir, "--long-texts", "head-tail"))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


# --- columns and packing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first, second",
    [("sentence1", "sentence2"), ("question1", "question2"), ("premise", "hypothesis"), ("text_a", "text_b")],
)
def test_known_column_pairs_are_detected(first, second):
    from trainer.reading import pick_text_columns

    frame = pd.DataFrame({first: ["a"], second: ["b"], "label": ["x"], "_file": ["f.csv"]})
    assert pick_text_columns(frame, None, None) == (first, second)


def test_a_named_text_column_means_single_texts_unless_a_pair_column_is_named():
    from trainer.reading import pick_text_columns

    frame = pd.DataFrame({"sentence1": ["a"], "sentence2": ["b"], "_file": ["f.csv"]})
    assert pick_text_columns(frame, "sentence2", None) == ("sentence2", None)
    assert pick_text_columns(frame, "sentence2", "sentence1") == ("sentence2", "sentence1")


@pytest.fixture(scope="module")
def preprocessor(tiny_encoder_dir):
    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    return WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=16)


def packed(preprocessor, first, second):
    from trainer.data import input_pipeline

    features = input_pipeline.encode(preprocessor, np.array([first]), np.array([second]))
    ids, types = features["input_word_ids"].numpy()[0], features["input_type_ids"].numpy()[0]
    cls, sep = preprocessor.special_ids["[CLS]"], preprocessor.special_ids["[SEP]"]
    assert ids[0] == cls
    ends = list(np.flatnonzero(ids == sep))
    return ids[1 : ends[0]], ids[ends[0] + 1 : ends[1]], types, ends


def test_a_pair_is_packed_as_cls_a_sep_b_sep_with_segment_ids(preprocessor):
    a, b, types, ends = packed(preprocessor, "so good", "it was awful")
    assert (len(a), len(b)) == (2, 3)
    assert list(types[: ends[1] + 1]) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_the_longer_side_is_truncated_first(preprocessor):
    long = " ".join(["good"] * 30)
    a, b, _, _ = packed(preprocessor, "so good", long)
    assert (len(a), len(b)) == (2, 11)  # 16 - [CLS] - 2 [SEP]: the short side keeps all
    a, b, _, _ = packed(preprocessor, long, "so good")
    assert (len(a), len(b)) == (11, 2)
    a, b, _, _ = packed(preprocessor, long, long)
    assert sorted((len(a), len(b))) == [6, 7]


# --- a pair classifier through the CLI -----------------------------------------------------------


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_run_reads_both_texts_and_learns_from_the_second(trained):
    metrics = json.loads((trained / "metrics.json").read_text())
    assert (metrics["text_column"], metrics["text_pair_column"]) == ("sentence1", "sentence2")
    assert metrics["hyperparameters"]["long_texts"] == "head-tail"
    # Three balanced classes: a model blind to the second text scores about 1/3.
    assert metrics["test"]["accuracy"] >= 0.6


READER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
pairs = json.loads(sys.argv[2])
out = serve(text=tf.constant([a for a, _ in pairs]), text_pair=tf.constant([b for _, b in pairs]))
print(json.dumps(out["probabilities"].numpy().tolist()))
"""
PAIRS = [["meh", "i love this movie"], ["i love it", "this movie is awful"], ["", "it was fine"]]


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_export_takes_text_and_text_pair_and_reloads_in_a_fresh_process(trained):
    import tensorflow as tf

    from trainer.serving import export

    serve = export.load(str(trained / "model"))
    assert set(serve.structured_input_signature[1]) == {"text", "text_pair"}
    here = serve(text=tf.constant([a for a, _ in PAIRS]), text_pair=tf.constant([b for _, b in PAIRS]))
    fresh = subprocess.run(
        [sys.executable, "-c", READER, str(trained / "model"), json.dumps(PAIRS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert fresh.returncode == 0, fresh.stderr
    there = np.array(json.loads(fresh.stdout.strip().splitlines()[-1]), np.float32)
    np.testing.assert_array_equal(there, here["probabilities"].numpy())


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_predict_reads_both_columns_and_matches_the_test_accuracy(trained, data, tmp_path):
    output = tmp_path / "predictions.csv"
    result = run_cli(
        "--model-dir",
        trained / "model",
        "--input",
        data["test"],
        "--output",
        output,
        "--batch-size",
        "7",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    rows = read_csv(output)
    assert [(r["sentence1"], r["sentence2"]) for r in rows] == [
        (r["sentence1"], r["sentence2"]) for r in read_csv(data["test"])
    ]
    accuracy = np.mean([r["predicted_label"] == r["label"] for r in rows])
    metrics = json.loads((trained / "metrics.json").read_text())
    assert accuracy == pytest.approx(metrics["test"]["accuracy"])


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_predict_on_a_file_without_the_second_text_says_so(trained, tmp_path):
    single = write_csv(tmp_path / "single.csv", [("so good",)], ("text",))
    result = run_in_process(
        "--model-dir", trained / "model", "--input", single, "--output", tmp_path / "out.csv", module="trainer.predict"
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {single}: this model reads sentence pairs, and no pair of columns")
    )


def test_a_pair_column_missing_in_the_validation_file_is_one_error_line(tiny_encoder_dir, data, tmp_path):
    validation = write_csv(
        tmp_path / "validation.csv", [(a, label) for a, _, label in pair_rows(10, 4)], ("sentence1", "label")
    )
    result = run_in_process(*args(tiny_encoder_dir, {**data, "validation": validation}, tmp_path / "job"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {validation}: no column 'sentence2' (the training data's text pair column); its "
        f"columns are ['sentence1', 'label']"
    )


def test_an_unknown_pair_column_names_the_flag(tiny_encoder_dir, data, tmp_path):
    result = run_in_process(*args(tiny_encoder_dir, data, tmp_path / "job", "--text-pair-column", "second"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: --text-pair-column: column 'second' is not in")


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_errors_csv_lists_both_texts_of_each_pair(trained, data):
    listed = read_csv(trained / "errors.csv")
    with open(trained / "errors.csv", encoding="utf-8") as f:
        assert f.readline().strip().split(",")[-2:] == ["text", "text_pair"]
    given = {
        (r["sentence1"], r["sentence2"], r["label"]) for name in ("validation", "test") for r in read_csv(data[name])
    }
    assert all((r["text"], r["text_pair"], r["true_label"]) in given for r in listed)


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_run_killed_after_its_second_epoch_resumes_and_ends_like_an_uninterrupted_one(
    trained, tiny_encoder_dir, data, tmp_path
):
    job_dir = tmp_path / "killed"
    kill_after_second_epoch(args(tiny_encoder_dir, data, job_dir), job_dir)
    assert not (job_dir / "metrics.json").exists()
    rerun = run_cli(*args(tiny_encoder_dir, data, job_dir))
    assert rerun.returncode == 0, rerun.stderr
    assert "resumed after epoch 2" in rerun.stdout
    resumed, uninterrupted = metrics_of(job_dir)["test"], metrics_of(trained)["test"]
    assert resumed["loss"] == pytest.approx(uninterrupted["loss"], rel=1e-5)
    assert resumed["confusion_matrix"] == uninterrupted["confusion_matrix"]


# --- the online server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(trained, tmp_path_factory):
    from test_server import HEALTH, PREDICT, Server, environ, free_port

    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": str(trained / "model"),
    }
    running = Server([], env, HEALTH, tmp_path_factory.mktemp("log") / "server.log")
    try:
        yield running.wait_ready(port)
    finally:
        running.stop()


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_server_answers_text_and_text_pair_instances_as_the_export_does(trained, server):
    import httpx
    import tensorflow as tf
    from test_server import PREDICT

    from trainer.serving import export

    response = httpx.post(
        server.url(server.port, PREDICT),
        timeout=60,
        json={"instances": [{"text": a, "text_pair": b} for a, b in PAIRS]},
    )
    assert response.status_code == 200, response.text
    *predicted, empty = response.json()["predictions"]  # PAIRS[-1]'s first text is empty
    assert empty == {"label": None, "probabilities": None, "note": "empty text: no prediction"}
    got = [[p["probabilities"][n] for n in sorted(p["probabilities"])] for p in predicted]
    serve = export.load(str(trained / "model"))
    out = serve(text=tf.constant([a for a, _ in PAIRS]), text_pair=tf.constant([b for _, b in PAIRS]))
    names = [n.decode() for n in out["label_names"].numpy()[0]]
    expected = out["probabilities"].numpy()[:-1, np.argsort(names)]
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_server_takes_instances_named_by_the_models_own_columns(server):
    """Issue #37, 12: a JSON Lines row of the training data, as Vertex batch prediction sends it."""
    import httpx
    from test_server import PREDICT

    answers = [
        httpx.post(server.url(server.port, PREDICT), timeout=60, json={"instances": instances}).json()
        for instances in (
            [{"sentence1": a, "sentence2": b} for a, b in PAIRS[:2]],
            [{"text": a, "text_pair": b} for a, b in PAIRS[:2]],
        )
    ]
    assert answers[0] == answers[1] and len(answers[0]["predictions"]) == 2


@pytest.mark.slow  # the trained pairs run (about 90 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_server_refuses_a_single_text_for_a_pair_model(server):
    import httpx
    from test_server import PREDICT

    response = httpx.post(server.url(server.port, PREDICT), timeout=60, json={"instances": [{"text": "so good"}]})
    assert response.status_code == 400
    assert response.json() == {
        "error": 'instances[0]: no "text_pair" field: expected '
        '{"text": "...", "text_pair": "..."} or '
        '{"sentence1": "...", "sentence2": "..."}'
    }
