"""Distillation end to end (issue #51): a teacher, a model or a file of its probabilities, trains
the student on the labelled and unlabeled texts; the student exports, predicts and serves as
any model does.

The default suite runs a dry run from a teacher file and the refusals; the slow tier (CI's slow
line) trains a tiny teacher and its students."""

import json
import os
import re
import shutil

import numpy as np
import pytest
from conftest import NEGATIVE, NEUTRAL, POSITIVE, metrics_of, read_csv, write_csv
from test_task import run_cli, run_in_process, train_args

LABELS = ("negative", "neutral", "positive")
# The tiny data's texts (most of them also validation or test texts, which are dropped) and
# twenty of their own.
UNLABELED = [(text,) for text in POSITIVE + NEGATIVE + NEUTRAL + [f"a movie , {i}" for i in range(20)]]


def teacher_file(path, rows, probabilities=None):
    """A teacher file as trainer.predict writes one: the text and a probability per class (by
    default, 0.8 on the row's label)."""
    table = []
    for i, (text, label) in enumerate(rows):
        p = probabilities[i] if probabilities is not None else [0.8 if name == label else 0.1 for name in LABELS]
        table.append((text, *p))
    return write_csv(path, table, ("text", *(f"probability_{name}" for name in LABELS)))


def every_text(tiny_data):
    """(text, label) of the training, validation and test files, and the unlabeled texts."""
    rows = [
        (row["text"], row["label"]) for name in ("train", "validation", "test") for row in read_csv(tiny_data[name])
    ]
    return rows + [(text, "neutral") for (text,) in UNLABELED]


@pytest.fixture(scope="module")
def unlabeled(tmp_path_factory):
    return write_csv(tmp_path_factory.mktemp("unlabeled") / "unlabeled.csv", UNLABELED, ("text",))


@pytest.mark.slow  # a dry run of its own (CI's slow line)
def test_a_dry_run_from_a_teacher_file_records_the_distillation(tiny_encoder_dir, tiny_data, unlabeled, tmp_path):
    probabilities = teacher_file(tmp_path / "teacher.csv", every_text(tiny_data))
    result = run_in_process(
        *train_args(
            tiny_encoder_dir,
            tiny_data,
            tmp_path / "job",
            "--dry-run",
            "--teacher-probabilities",
            probabilities,
            "--unlabeled-file",
            unlabeled,
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = metrics_of(tmp_path / "job")
    block = metrics["distillation"]
    assert block["teacher"] == probabilities and block["teacher_kind"] == "file"
    # The tiny data's validation and test texts among them are dropped, and the log says how
    # many; a dry run then reads one batch of the rest, as of every split.
    assert re.search(
        r"unlabeled texts: \d+ of 50 rows of .* kept \(0 empty, [1-9]\d* a validation "
        r"or test text exactly, dropped\)",
        result.stdout + result.stderr,
    )
    assert (
        block["transfer_set"]
        == {"train": 8, "unlabeled": 8}
        == {"train": metrics["dataset_sizes"]["train"], "unlabeled": 8}
    )
    assert (block["temperature"], block["alpha"]) == (2.0, 0.5)
    assert set(block["validation"]["teacher"]) >= {"loss", "accuracy", "macro_f1"}


def test_a_teacher_file_missing_texts_is_one_error_with_their_count(tiny_encoder_dir, tiny_data, tmp_path):
    rows = every_text(tiny_data)
    missing = rows[0][0]
    probabilities = teacher_file(tmp_path / "teacher.csv", [row for row in rows if row[0] != missing])
    # (not a --dry-run, which reads 8 training rows)
    result = run_in_process(
        *train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--teacher-probabilities", probabilities)
    )
    assert result.returncode == 2
    count = sum(row["text"] == missing for row in read_csv(tiny_data["train"]))
    assert result.stderr == (
        f"error: --teacher-probabilities: {probabilities} has no row for "
        f"{count} of the 90 train texts, e.g. {missing!r}\n"
    )


def test_probabilities_that_do_not_sum_to_one_name_their_line(tiny_encoder_dir, tiny_data, tmp_path):
    rows = every_text(tiny_data)
    bad = [[0.8 if name == label else 0.1 for name in LABELS] for _, label in rows]
    bad[0] = [0.5, 0.5, 0.5]
    probabilities = teacher_file(tmp_path / "teacher.csv", rows, bad)
    result = run_in_process(
        *train_args(
            tiny_encoder_dir, tiny_data, tmp_path / "job", "--dry-run", "--teacher-probabilities", probabilities
        )
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --teacher-probabilities: {probabilities} line 2: ")


def test_a_teacher_of_other_labels_is_refused(tiny_encoder_dir, tiny_data, tmp_path):
    rows = [(text, label) for text, label in every_text(tiny_data)]
    path = write_csv(
        tmp_path / "teacher.csv",
        [(text, 0.5, 0.5) for text, _ in rows],
        ("text", "probability_good", "probability_bad"),
    )
    result = run_in_process(
        *train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--dry-run", "--teacher-probabilities", path)
    )
    assert result.returncode == 2
    assert "the teacher's task or labels differ from the data's" in result.stderr


def test_a_teacher_that_is_no_export_is_refused_before_reading_data(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_in_process(*train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--teacher", tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --teacher: no exported model in {tmp_path}")


# --------------------------------------------------------------------------- the slow tier


@pytest.fixture(scope="module")
def teacher(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("teacher") / "job"
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir / "model"


@pytest.fixture(scope="module")
def student(teacher, tiny_encoder_dir, tiny_data, unlabeled, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("student") / "job"
    # A progress line at every look at the clock (the later flag wins).
    result = run_cli(
        *train_args(
            tiny_encoder_dir,
            tiny_data,
            job_dir,
            "--teacher",
            teacher,
            "--unlabeled-file",
            unlabeled,
            "--encoder-layers",
            "1",
            "--log-every-seconds",
            "0.000001",
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_model_teacher_labels_every_text_once_into_the_job_dir(student, tiny_data):
    job_dir, result = student
    block = metrics_of(job_dir)["distillation"]
    assert block["teacher_kind"] == "model"
    written = read_csv(block["teacher_file"])
    assert block["teacher_file"].startswith(str(job_dir / "teacher"))
    assert {row["text"] for row in written} >= {row["text"] for row in read_csv(tiny_data["train"])}
    assert {f"probability_{name}" for name in LABELS} <= set(written[0])
    assert f"written to {block['teacher_file']}" in result.stdout + result.stderr
    assert re.search(r"teacher predicted [\d,]+/[\d,]+ rows \(\d+%\)  .* rows/s  ETA ", result.stdout + result.stderr)


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_student_is_scored_beside_its_teacher(student):
    validation = metrics_of(student[0])["distillation"]["validation"]
    assert 0.0 <= validation["agreement"] <= 1.0
    assert set(validation["teacher"]) == set(validation["student"])
    assert metrics_of(student[0])["hyperparameters"]["encoder_layers"] == 1


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_rerun_reuses_the_teachers_file(student, teacher, tiny_encoder_dir, tiny_data, unlabeled, tmp_path):
    """(In a job dir of its own holding the student's teacher/ folder, as a resumed or repeated
    run finds it: the student's own job dir stays as the other tests read it.)"""
    job_dir = tmp_path / "job"
    shutil.copytree(student[0] / "teacher", job_dir / "teacher")
    path = str(job_dir / "teacher" / os.path.basename(metrics_of(student[0])["distillation"]["teacher_file"]))
    before = open(path).read()
    result = run_cli(
        *train_args(
            tiny_encoder_dir,
            tiny_data,
            job_dir,
            "--teacher",
            teacher,
            "--unlabeled-file",
            unlabeled,
            "--encoder-layers",
            "1",
            "--epochs",
            "1",
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"teacher: reusing its outputs in {path}" in result.stdout + result.stderr
    assert "written to" not in result.stdout + result.stderr
    assert open(path).read() == before


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_teachers_predict_output_as_a_file_gives_the_same_student(
    student, teacher, tiny_encoder_dir, tiny_data, unlabeled, tmp_path
):
    texts = write_csv(tmp_path / "texts.csv", [(text,) for text, _ in every_text(tiny_data)], ("text",))
    predicted = tmp_path / "teacher.csv"
    result = run_cli("--model-dir", teacher, "--input", texts, "--output", predicted, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    job_dir = tmp_path / "job"
    result = run_cli(
        *train_args(
            tiny_encoder_dir,
            tiny_data,
            job_dir,
            "--teacher-probabilities",
            predicted,
            "--unlabeled-file",
            unlabeled,
            "--encoder-layers",
            "1",
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    by_model, by_file = metrics_of(student[0]), metrics_of(job_dir)
    assert by_file["distillation"]["teacher_kind"] == "file"
    np.testing.assert_allclose(by_file["validation"]["loss"], by_model["validation"]["loss"], rtol=1e-4)
    assert by_file["test"]["confusion_matrix"] == by_model["test"]["confusion_matrix"]


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_the_student_predicts_and_serves_as_any_model(student, tmp_path):
    from test_server import HEALTH, PREDICT, Server, environ, free_port, post

    job_dir, _ = student
    texts = ["i love this movie", "i hate this movie"]
    path = write_csv(tmp_path / "texts.csv", [(t,) for t in texts], ("text",))
    output = tmp_path / "predicted.csv"
    result = run_cli("--model-dir", job_dir / "model", "--input", path, "--output", output, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    predicted = [row["predicted_label"] for row in read_csv(output)]
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": str(job_dir / "model"),
    }
    running = Server([], env, HEALTH, tmp_path / "server.log")
    try:
        response = post(running.wait_ready(port), {"instances": texts})
    finally:
        running.stop()
    assert response.status_code == 200, response.text
    assert [p["label"] for p in response.json()["predictions"]] == predicted
    assert json.loads((job_dir / "model" / "trainer_export.json").read_text())


@pytest.mark.slow  # run by hand (docs/testing.md), not in CI
def test_a_teacher_of_other_labels_is_refused_before_it_reads_the_texts(teacher, tiny_encoder_dir, tmp_path):
    data = {
        name: write_csv(tmp_path / f"{name}.csv", [(f"good {name}", "good"), (f"bad {name}", "bad")] * 10)
        for name in ("train", "validation", "test")
    }
    result = run_in_process(*train_args(tiny_encoder_dir, data, tmp_path / "job", "--teacher", teacher))
    assert result.returncode == 2
    assert result.stderr == (
        f"error: --teacher: {teacher} outputs ['probability_negative', "
        f"'probability_neutral', 'probability_positive'], but this run needs "
        f"['probability_bad', 'probability_good']: the teacher's task or labels "
        f"differ from the data's\n"
    )
    assert not (tmp_path / "job" / "teacher").exists()
