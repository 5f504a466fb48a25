"""`--task embedding` end to end on a tiny encoder, the way a user runs it: scored pairs trained
into a bi-encoder (CoSENT), its export one text in and a unit-length vector out, predicted and
served. One trained run is shared by the module; bad input is refused before anything trains."""

import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tiny_bert
from conftest import NEGATIVE, POSITIVE, TINY_TASK_FLAGS, metrics_of, read_csv, write_csv
from test_resume import kill_after_second_epoch
from test_task import run_cli, run_in_process


def scored_pairs(count, seed):
    """(sentence1, sentence2, score) rows: two texts of one sentiment score about 4, of two
    sentiments about 1 (a similarity a tiny encoder can learn)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        first, second = rng.choice(POSITIVE + NEGATIVE), rng.choice(POSITIVE + NEGATIVE)
        alike = (first in POSITIVE) == (second in POSITIVE)
        rows.append((first, second, round((4.0 if alike else 1.0) + rng.uniform(-0.5, 0.5), 2)))
    return rows


@pytest.fixture(scope="module")
def quiet_encoder_dir(tmp_path_factory):
    """The tiny encoder without dropout: its sentence vectors start alike (cosines near 0.99),
    and dropout's noise then outweighs their differences, so CoSENT's easiest way down is to make
    every vector the same. The real encoder trains with its dropout (STS-B, one epoch on 2,000
    pairs: validation Spearman 0.813 before, 0.830 after)."""
    quiet = {**tiny_bert.CONFIG, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    return tiny_bert.write_hf_checkpoint(tmp_path_factory.mktemp("quiet_bert"), quiet)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("embedding_data")
    # sentence1, sentence2 and score: the pair and the label found by their names.
    return {
        name: write_csv(root / f"{name}.csv", scored_pairs(count, seed), ("sentence1", "sentence2", "score"))
        for name, count, seed in (("train", 160, 1), ("validation", 40, 2), ("test", 40, 3))
    }


def args(tiny_encoder_dir, data, job_dir, *extra):
    return [
        "--task",
        "embedding",
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
        "20",
        "--batch-size",
        "16",
        "--learning-rate",
        "3e-3",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        *TINY_TASK_FLAGS,
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(quiet_encoder_dir, data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("embedding") / "job"
    result = run_cli(*args(quiet_encoder_dir, data, job_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


def cosines_of(vectors, pair_vectors):
    return np.sum(np.asarray(vectors) * np.asarray(pair_vectors), axis=1)


# --- a run through the CLI -----------------------------------------------------------------------


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_metrics_json_holds_the_correlations_of_cosine_with_the_score_per_split(trained):
    metrics = metrics_of(trained)
    assert metrics["task"] == "embedding" and metrics["label_column"] == "score"
    for split in ("train", "validation", "test"):
        assert {"examples", "loss", "spearman", "pearson"} <= set(metrics[split])
    assert metrics["hyperparameters"]["selection_metric"] == "val_spearman"


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_the_report_shows_the_cosines_of_similar_and_dissimilar_pairs_and_nearest_neighbours(trained):
    page = (trained / "report.html").read_text()
    assert (trained / "report" / "similarity.png").exists() and "Cosine of similar and dissimilar pairs" in page
    assert "Nearest neighbours: validation" in page


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_the_tiny_model_learns_the_similarities_beyond_its_zero_shot_score(trained):
    metrics = metrics_of(trained)
    assert metrics["test"]["spearman"] >= 0.6
    assert metrics["zero_shot"]["validation"]["spearman"] + 0.2 < metrics["validation"]["spearman"]


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_history_tracks_the_pair_order_and_the_validation_correlations_each_epoch(trained):
    rows = read_csv(trained / "eval_history.csv")
    assert list(rows[0])[:6] == ["epoch", "step", "loss", "pair_order", "val_loss", "val_spearman"]
    assert [int(r["epoch"]) for r in rows] == list(range(1, 21))


READER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
print(json.dumps([serve(text=tf.constant(json.loads(texts)))["embedding"].numpy().tolist() for texts in sys.argv[2:]]))
"""


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_the_export_gives_unit_vectors_whose_cosines_reproduce_the_test_spearman(trained, data):
    from scipy import stats

    rows = read_csv(data["test"])
    fresh = subprocess.run(
        [sys.executable, "-c", READER, str(trained / "model")]
        + [json.dumps([r[column] for r in rows]) for column in ("sentence1", "sentence2")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert fresh.returncode == 0, fresh.stderr
    first, second = (np.array(v) for v in json.loads(fresh.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
    spearman = stats.spearmanr(cosines_of(first, second), [float(r["score"]) for r in rows])[0]
    assert spearman == pytest.approx(metrics_of(trained)["test"]["spearman"], abs=0.005)


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_predict_writes_a_vector_per_row_in_input_order(trained, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("i love it", "so bad", "meh")))
    output = tmp_path / "vectors.jsonl"
    result = run_cli("--model-dir", trained / "model", "--input", texts, "--output", output, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["text"] for r in rows] == ["i love it", "so bad", "meh"]
    vectors = np.array([r["embedding"] for r in rows])
    assert vectors.shape[0] == 3 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_predict_on_pairs_writes_both_vectors_and_cosines_that_reproduce_the_test_spearman(trained, data, tmp_path):
    from scipy import stats

    rows = read_csv(predicted(trained, data["test"], tmp_path / "pairs.csv"))
    assert list(rows[0]) == ["sentence1", "sentence2", "score", "embedding", "pair_embedding", "cosine", "note"]
    first, second = (np.array([json.loads(r[c]) for r in rows]) for c in ("embedding", "pair_embedding"))
    np.testing.assert_allclose(cosines_of(first, second), [float(r["cosine"]) for r in rows], atol=1e-6)
    spearman = stats.spearmanr([float(r["cosine"]) for r in rows], [float(r["score"]) for r in rows])[0]
    assert spearman == pytest.approx(metrics_of(trained)["test"]["spearman"], abs=0.005)


@pytest.mark.slow  # the trained embedding run, by hand (.ci/run's BY_HAND)
def test_an_npy_output_holds_the_vectors_the_csv_holds_and_nan_for_an_empty_text(trained, data, tmp_path):
    source = tmp_path / "texts.csv"
    source.write_text('text\ni love it\n""\nso bad\n')
    array = np.load(predicted(trained, source, tmp_path / "vectors.npy"))
    rows = read_csv(predicted(trained, source, tmp_path / "vectors.csv"))
    assert array.dtype == np.float32 and array.shape[0] == 3 and np.isnan(array[1]).all()
    for index in (0, 2):
        np.testing.assert_allclose(array[index], json.loads(rows[index]["embedding"]), atol=1e-6)


@pytest.mark.slow  # the trained embedding run, by hand (.ci/run's BY_HAND)
def test_an_npy_output_of_pairs_holds_both_vectors_of_each_row(trained, data, tmp_path):
    array = np.load(predicted(trained, data["test"], tmp_path / "pairs.npy"))
    assert array.shape[1] == 2 and array.shape[0] == len(read_csv(data["test"]))
    np.testing.assert_allclose(np.linalg.norm(array, axis=-1), 1.0, atol=1e-5)


def evaluated_line(trained, source) -> str:
    """trainer.evaluate's line of metrics for `source` under the trained run's float32 model."""
    result = run_cli("--model-dir", trained / "model", "--input", source, "--precision", "float32",
                     module="trainer.evaluate")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return next(line for line in result.stdout.splitlines() if line.startswith(f"{os.path.basename(source)}: "))


def variant_run(encoder_dir, data, job_dir, *flags):
    """The other variants' tiny run (test_unscored_pairs.py, test_labelled_texts.py): 10 epochs
    on data's train and validation files; returns the job dir."""
    result = run_cli(
        "--task", "embedding", "--encoder", encoder_dir, "--job-dir", job_dir,
        "--training-file", data["train"], "--validation-file", data["validation"],
        "--epochs", "10", "--batch-size", "16", "--learning-rate", "3e-3", "--mixed-precision", "off",
        *TINY_TASK_FLAGS, *flags,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir


def reported_again(trained) -> tuple:
    """(errors.csv's rows as the run wrote them, as `trainer.report` rewrites them from the
    export); the report's page and errors are removed first, so the command writes them anew."""
    written = read_csv(trained / "errors.csv")
    for name in ("errors.csv", "report.html"):
        (trained / name).unlink()
    result = run_cli("--job-dir", trained, module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (trained / "report.html").exists()
    return written, read_csv(trained / "errors.csv")


def assert_same_rows(written, rebuilt, numbers) -> None:
    """The same rows in the same order: their texts equal, their `numbers` columns within 1e-4
    (the run scored its trained model, the report the float32 export)."""
    assert [r["text"] for r in rebuilt] == [r["text"] for r in written]
    for ours, theirs in zip(rebuilt, written):
        for column in numbers:
            assert float(ours[column]) == pytest.approx(float(theirs[column]), abs=1e-4)


def predicted(trained, source, output):
    """`output`, which trainer.predict wrote from `source` with the trained run's model."""
    result = run_cli("--model-dir", trained / "model", "--input", source, "--output", output, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    return output


def predicted_vectors(model_dir, source, output, *flags):
    result = run_cli("--model-dir", model_dir, "--input", source, "--output", output, *flags, module="trainer.predict")
    assert result.returncode == 0, result.stderr
    rows = read_csv(output)
    return np.array([json.loads(r["embedding"]) for r in rows]), np.array([float(r["cosine"]) for r in rows])


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_the_int8_and_onnx_copies_are_checked_on_vectors_and_predict_alike(trained, data, tmp_path):
    job = tmp_path / "job"
    shutil.copytree(trained, job)  # the copies change what the other tests' predict picks
    for precision in ("int8", "onnx"):
        result = run_cli("--model-dir", job / "model", "--precision", precision, module="trainer.export_quantized")
        assert result.returncode == 0, result.stdout + result.stderr
    checks = json.loads((job / "model" / "precisions.json").read_text())
    for precision in ("int8", "onnx"):
        assert checks[precision]["passed"] and checks[precision]["label_agreement_of"] == "vectors"
        assert checks[precision]["label_agreement"] >= 0.99 and checks[precision]["metric"] == "spearman"
    predicted = lambda name, *flags: predicted_vectors(job / "model", data["test"], tmp_path / name, *flags)  # noqa: E731
    float32, cosines = predicted("f.csv", "--precision", "float32")
    onnx, _ = predicted("o.csv", "--runtime", "onnx", "--precision", "float32")
    int8, int8_cosines = predicted("i.csv", "--precision", "int8")
    np.testing.assert_allclose(onnx, float32, atol=1e-4)
    assert np.mean(np.sum(int8 * float32, axis=1) >= 0.99) >= 0.99
    assert np.abs(int8_cosines - cosines).max() < 0.05


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_evaluate_scores_a_file_of_scored_pairs_as_the_run_scored_its_test_split(trained, data):
    line = evaluated_line(trained, data["test"])
    expected = metrics_of(trained)["test"]["spearman"]
    assert float(line.split("spearman ")[1].split()[0]) == pytest.approx(expected, abs=0.0005)


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run)
def test_the_server_answers_the_vectors_predict_writes(trained, tmp_path):
    import httpx
    from test_server import HEALTH, PREDICT, Server, environ, free_port

    from trainer.inference import loaded_model
    from trainer.serving import export

    texts = ["i love this movie", "so bad", "meh"]
    vectors = loaded_model.predict_outputs(export.load(str(trained / "model")), texts, 8)["embedding"]
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": str(trained / "model"),
    }
    server = Server([], env, HEALTH, tmp_path / "server.log")
    try:
        server.wait_ready(port)
        response = httpx.post(server.url(port, PREDICT), json={"instances": texts}, timeout=60)
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    np.testing.assert_allclose([p["embedding"] for p in response.json()["predictions"]], vectors, atol=1e-6)


@pytest.mark.slow  # the trained embedding run, by hand (.ci/run's BY_HAND)
def test_a_run_killed_after_its_second_epoch_resumes_and_ends_like_an_uninterrupted_one(
    trained, quiet_encoder_dir, data, tmp_path
):
    job_dir = tmp_path / "killed"
    kill_after_second_epoch(args(quiet_encoder_dir, data, job_dir), job_dir)
    assert not (job_dir / "metrics.json").exists()
    rerun = run_cli(*args(quiet_encoder_dir, data, job_dir))
    assert rerun.returncode == 0, rerun.stderr
    assert "resumed after epoch 2" in rerun.stdout
    resumed, uninterrupted = metrics_of(job_dir), metrics_of(trained)
    for key in ("spearman", "pearson"):
        assert resumed["test"][key] == pytest.approx(uninterrupted["test"][key], abs=1e-5)
    assert resumed["zero_shot"] == uninterrupted["zero_shot"]


# --- bad input: one line naming the file or flag, exit 2 ------------------------------------------


def test_a_file_of_single_texts_is_refused_naming_the_pair_flag(tiny_encoder_dir, data, tmp_path):
    files = {
        name: write_csv(tmp_path / f"{name}.csv", [(a, s) for a, _, s in scored_pairs(20, seed)], ("sentence", "score"))
        for seed, name in enumerate(("train", "validation", "test"))
    }
    single = files["train"]
    result = run_in_process(*args(tiny_encoder_dir, files, tmp_path / "job"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {single}: --task embedding trains on pairs of texts")
    assert "--text-pair-column" in lines[0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--label-names", "a,b"), "--label-names: has no meaning with --task embedding"),
        (("--selection-metric", "val_macro_f1"), "--selection-metric: val_macro_f1 is not a embedding metric"),
        (("--class-weights", "balanced"), "--class-weights: 'balanced' needs classes"),
        (("--target-precision", "0.9"), "--target-precision"),
        (("--find-label-issues",), "--find-label-issues"),
    ],
)
def test_a_classifiers_flags_are_refused_with_embedding(tiny_encoder_dir, data, tmp_path, flags, message):
    result = run_in_process(*args(tiny_encoder_dir, data, tmp_path / "job", *flags))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines


def test_a_non_numeric_score_names_its_row(tiny_encoder_dir, data, tmp_path):
    rows = scored_pairs(20, 5)
    rows[6] = (rows[6][0], rows[6][1], "alike")
    bad = write_csv(tmp_path / "train.csv", rows, ("sentence1", "sentence2", "score"))
    result = run_in_process(*args(tiny_encoder_dir, {**data, "train": bad}, tmp_path / "job"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {bad} line 8, column 'score': 'alike' is not a number (--task embedding reads the label as a score)"
    )


@pytest.mark.slow  # the trained embedding run: CI's 2.21 slow line (.ci/run); rewrites its report, so last
def test_report_rebuilds_the_errors_of_scored_pairs_as_the_run_wrote_them(trained):
    assert_same_rows(*reported_again(trained), ("rank_gap", "true_score", "cosine"))
