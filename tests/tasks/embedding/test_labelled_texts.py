"""`--task embedding` on single texts labelled with classes: the file's columns choose the
supervised contrastive loss (--loss auto), training batches hold runs of texts of a class, the
run is scored by kNN accuracy, and its export is the same sentence encoder."""

import json
import random

import numpy as np
import pytest
from conftest import metrics_of, read_csv, write_csv
from test_embedding import (
    assert_same_rows,
    evaluated_line,
    predicted,
    quiet_encoder_dir,  # noqa: F401  (a fixture)
    reported_again,
    variant_run,
)
from test_task import run_in_process

from trainer import config as config_lib
from trainer import task_registry
from trainer.data import splits
from trainer.errors import UserError

# Each class has three keywords of the tiny encoder's vocabulary; a text is one keyword among
# three shared filler words: to an untrained encoder, texts of a class are hardly alike.
WORDS = "i love hate this movie it is was not good bad great awful fine ok the so very meh a".split()
KEYWORDS = {"w": WORDS[0:3], "x": WORDS[3:6], "y": WORDS[6:9], "z": WORDS[9:12]}
FILLER = WORDS[12:]


def labelled_texts(count, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        label = rng.choice(sorted(KEYWORDS))
        words = [rng.choice(KEYWORDS[label]), *rng.sample(FILLER, 3)]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("labelled_texts")
    return {
        name: write_csv(root / f"{name}.csv", labelled_texts(count, seed), ("text", "label"))
        for name, count, seed in (("train", 160, 1), ("validation", 60, 2))
    }


def test_single_texts_with_a_class_column_train_with_the_supervised_contrastive_loss(data):
    config = config_lib.build_config(["--task", "embedding", "--training-file", str(data["train"])], {})
    assert (config.train.loss, config.train.selection_metric) == ("supervised-contrastive", "val_knn_accuracy")
    assert task_registry.from_config(config).rows_per_label == 4


def test_single_texts_without_a_class_are_refused_naming_the_label_column(tmp_path):
    texts = write_csv(tmp_path / "texts.csv", [("i love it",), ("so bad",)], ("text",))
    config = config_lib.build_config(["--task", "embedding", "--training-file", str(texts)], {})
    assert config.train.loss == "cosent"
    with pytest.raises(UserError, match="no label column found.*Name one with --label-column"):
        splits.load_datasets(config)


@pytest.mark.parametrize(
    "dims, message",
    [
        ("16,x", "whole numbers above 0"),
        ("8,16", "from the largest down"),
        ("16,16", "from the largest down"),
    ],
)
def test_embedding_dims_are_whole_numbers_from_the_largest_down(data, dims, message):
    with pytest.raises(UserError, match=f"^--embedding-dims: '{dims}': {message}"):
        config_lib.build_config(
            ["--task", "embedding", "--training-file", str(data["train"]), "--embedding-dims", dims], {}
        )


def test_embedding_dims_need_a_model_of_vectors():
    with pytest.raises(UserError, match="^--embedding-dims: needs a model of vectors"):
        config_lib.build_config(["--task", "regression", "--embedding-dims", "8"], {})


def test_embedding_dims_wider_than_the_encoder_are_one_line(quiet_encoder_dir, data, tmp_path):  # noqa: F811
    result = run_in_process(
        "--task", "embedding", "--encoder", quiet_encoder_dir, "--job-dir", tmp_path / "job",
        "--training-file", data["train"], "--validation-file", data["validation"], "--max-seq-length", "16",
        "--embedding-dims", "32,8",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --embedding-dims: 32 is more than the encoder's 16-wide vectors"
    ]


def test_labelled_texts_refuse_balanced_class_weights(data):
    with pytest.raises(UserError, match="^--class-weights: 'balanced' weighs each row's loss"):
        config_lib.build_config(
            ["--task", "embedding", "--training-file", str(data["train"]), "--class-weights", "balanced"], {}
        )


@pytest.fixture(scope="module")
def trained(quiet_encoder_dir, data, tmp_path_factory):  # noqa: F811
    job_dir = tmp_path_factory.mktemp("labelled") / "job"
    flags = ("--max-seq-length", "8", "--long-texts", "windows", "--embedding-dims", "16,8")
    return variant_run(quiet_encoder_dir, data, job_dir, *flags)


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_the_tiny_model_groups_each_class_beyond_its_zero_shot_score(trained):
    metrics = metrics_of(trained)
    assert metrics["hyperparameters"]["loss"] == "supervised-contrastive" and metrics["labels"] == ["w", "x", "y", "z"]
    before, after = metrics["zero_shot"]["validation"], metrics["validation"]
    assert before["knn_accuracy"] + 0.15 < after["knn_accuracy"] and after["loss"] < before["loss"]
    assert "runs of 4 texts of a label" in (trained / "training.log").read_text()


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_history_card_and_errors_speak_of_classes(trained):
    history = read_csv(trained / "eval_history.csv")
    assert list(history[0])[:6] == ["epoch", "step", "loss", "nearest_same_label", "val_loss", "val_knn_accuracy"]
    card = " ".join((trained / "MODEL_CARD.md").read_text().split())
    assert "texts labelled with classes" in card and "kNN accuracy" in card
    errors = read_csv(trained / "errors.csv")
    assert list(errors[0]) == ["split", "rank", "true_label", "neighbours_label", "agreeing", "text"]
    page = (trained / "report.html").read_text()
    assert (trained / "report" / "nearest_classes.png").exists() and "nearest text of its class and of another" in page


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_nested_dims_are_scored_each_and_exported_each_of_unit_length(trained):
    import subprocess
    import sys

    dims = metrics_of(trained)["validation"]["dims"]
    assert set(dims) == {"16", "8"} and dims["8"]["knn_accuracy"] > 0.5
    reader = (
        "import sys, json, tensorflow as tf, tensorflow_text\n"
        "out = tf.saved_model.load(sys.argv[1]).signatures['serving_default'](text=tf.constant(['i love it']))\n"
        "print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))"
    )
    result = subprocess.run([sys.executable, "-c", reader, str(trained / "model")], capture_output=True, text=True)
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(outputs) == ["embedding", "embedding_16", "embedding_8"]
    short = np.array(outputs["embedding_8"][0])
    whole = np.array(outputs["embedding"][0])
    np.testing.assert_allclose(short, whole[:8] / np.linalg.norm(whole[:8]), atol=1e-5)


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_with_windows_a_text_is_read_past_max_seq_length(trained, tmp_path):
    """Trained with --long-texts windows (8 tokens): two texts alike in their first window and
    unlike after it get different vectors, which a cut at 8 tokens would make equal."""
    start = "i love this movie so very"
    texts = write_csv(tmp_path / "long.csv", [(f"{start} good great fine",), (f"{start} bad awful hate",)], ("text",))
    first, second = (
        np.array(json.loads(r["embedding"])) for r in read_csv(predicted(trained, texts, tmp_path / "v.csv"))
    )
    assert float(first @ second) < 0.999


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_predict_writes_one_vector_per_text(trained, tmp_path):
    texts = write_csv(tmp_path / "texts.csv", [("i love it",), ("so bad",)], ("text",))
    vectors = np.array([json.loads(r["embedding"]) for r in read_csv(predicted(trained, texts, tmp_path / "v.csv"))])
    assert vectors.shape[0] == 2 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow  # the trained labelled-texts run: CI's 2.21 slow line (.ci/run)
def test_evaluate_reads_the_files_classes_and_scores_as_the_run_did(trained, data):
    expected = metrics_of(trained)["validation"]["knn_accuracy"]
    assert f"knn accuracy {expected:.4f}  (60 rows)" in evaluated_line(trained, data["validation"])


@pytest.mark.slow  # the trained labelled-texts run, by hand (.ci/run's BY_HAND); rewrites its report, so last
def test_report_rebuilds_the_errors_of_labelled_texts_as_the_run_wrote_them(trained):
    written, rebuilt = reported_again(trained)
    assert_same_rows(written, rebuilt, ("agreeing",))
    assert [r["neighbours_label"] for r in rebuilt] == [r["neighbours_label"] for r in written]
