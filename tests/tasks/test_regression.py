"""`--task regression` end to end on a tiny encoder: one score per text, the way a user runs it.

One trained run is shared by the module (with a hypertune metrics file, as in a tuning trial);
a second run of the same flags is killed after its 2nd epoch and rerun.
"""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from conftest import TINY_TASK_FLAGS, labelled_rows, metrics_of, read_csv, write_csv
from test_resume import kill_after_second_epoch
from test_task import run_cli, run_in_process

SCORES = {"negative": 1.0, "neutral": 2.5, "positive": 4.0}


def scored_rows(count, seed):
    """(sentence, score) rows: the class's score plus noise, so ranks within a class vary."""
    rng = random.Random(seed)
    return [(text, round(SCORES[label] + rng.uniform(-0.3, 0.3), 3)) for text, label in labelled_rows(count, seed)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("regression_data")
    # The label column is called `score`: found without --label-column.
    return {
        name: write_csv(root / f"{name}.csv", scored_rows(count, seed), ("sentence", "score"))
        for name, count, seed in (("train", 90, 1), ("validation", 30, 2), ("test", 30, 3))
    }


def args(tiny_encoder_dir, data, job_dir, *extra):
    return [
        "--task",
        "regression",
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
        "16",
        "--mixed-precision",
        "off",
        *TINY_TASK_FLAGS,
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, data, tmp_path_factory):
    root = tmp_path_factory.mktemp("regression")
    hypertune = root / "hypertune.metrics"
    result = run_cli(*args(tiny_encoder_dir, data, root / "job"), env={"CLOUD_ML_HP_METRIC_FILE": str(hypertune)})
    assert result.returncode == 0, result.stdout + result.stderr
    return {"job_dir": root / "job", "hypertune": hypertune}


def test_the_log_reads_a_regression_label_as_a_number_without_an_empty_class_list(data, caplog):
    """Issue #23, 8: the log said `label 'score' as number: []`."""
    from trainer import config as config_lib
    from trainer.training import jobdir, stages
    from trainer.training.context import RunContext

    config = config_lib.build_config(
        ["--task", "regression", "--training-file", data["train"], "--validation-file", data["validation"]], {}
    )
    ctx = RunContext(config, {}, jobdir.JobPaths.from_config(config), is_chief=True)
    with caplog.at_level("INFO", logger="trainer"):
        stages.load_data(ctx)
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("data: "))
    assert line.endswith("label 'score' as a number (regression target))") and "[]" not in line


# --- metrics computed by hand ------------------------------------------------------------------


def test_correlation_metrics_match_hand_computed_values():
    from trainer.tasks.regression.scores import correlation_metrics

    # predicted 1 2 3 4 vs labels 1 3 2 5: errors 0 -1 1 -1; ranks 1 2 3 4 vs 1 3 2 4.
    metrics = correlation_metrics(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 5.0]))
    assert metrics["mse"] == pytest.approx(3 / 4)
    assert metrics["mae"] == pytest.approx(3 / 4)
    assert metrics["spearman"] == pytest.approx(1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)))  # 0.8
    # pearson: centered x -1.5 -.5 .5 1.5, y -1.75 .25 -.75 2.25; cov 5.5/sqrt(5 * 8.75)
    assert metrics["pearson"] == pytest.approx(5.5 / np.sqrt(5 * 8.75))


def test_a_constant_prediction_has_zero_correlation_not_nan():
    from trainer.tasks.regression.scores import correlation_metrics

    metrics = correlation_metrics(np.full(3, 2.0), np.array([1.0, 2.0, 4.0]))
    assert metrics["pearson"] == 0.0 and metrics["spearman"] == 0.0
    assert metrics["mse"] == pytest.approx((1 + 0 + 4) / 3)


def test_the_loss_is_the_mse_in_training_label_standard_deviations():
    from trainer.data.labels import LabelSpec
    from trainer.tasks.regression import RegressionTask

    task = RegressionTask()
    task.prepare(LabelSpec("number", []), np.array([0.0, 2.0, 4.0]))  # std sqrt(8/3)
    result = task.summarize(np.array([[1.0], [2.0]]), np.array([0.0, 2.0]), [])
    assert result["mse"] == pytest.approx(0.5)
    assert result["loss"] == pytest.approx(0.5 / (8 / 3))


# --- a run through the CLI -----------------------------------------------------------------------


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_metrics_json_holds_correlations_and_errors_per_split(trained):
    metrics = metrics_of(trained["job_dir"])
    assert metrics["task"] == "regression" and metrics["label_column"] == "score"
    for split in ("train", "validation", "test"):
        length = {"by_length"} if split != "train" else set()
        assert set(metrics[split]) == {"examples", "loss", "pearson", "spearman", "mse", "mae"} | length
    assert metrics["calibration"] is None  # a temperature is for class probabilities
    assert metrics["hyperparameters"]["selection_metric"] == "val_spearman"


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_tiny_model_learns_the_scores(trained):
    test = metrics_of(trained["job_dir"])["test"]
    assert test["spearman"] >= 0.7 and test["pearson"] >= 0.8


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_history_tracks_the_regression_metrics_each_epoch(trained):
    rows = read_csv(trained["job_dir"] / "eval_history.csv")
    assert list(rows[0]) == [
        "epoch",
        "step",
        "loss",
        "mae",
        "val_loss",
        "val_spearman",
        "val_pearson",
        "val_mse",
        "val_mae",
        "learning_rate",
        "seconds",
    ]
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    best = max(rows, key=lambda r: float(r["val_spearman"]))
    assert metrics_of(trained["job_dir"])["best_epoch"] == int(best["epoch"])


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_tuning_service_hears_val_spearman(trained):
    lines = [json.loads(line) for line in trained["hypertune"].read_text().splitlines()]
    assert len(lines) == 7  # six epochs and the final value
    assert float(lines[-1]["val_spearman"]) == pytest.approx(
        metrics_of(trained["job_dir"])["validation"]["spearman"], abs=1e-6
    )


READER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
print(json.dumps(serve(text=tf.constant(json.loads(sys.argv[2])))["score"].numpy().tolist()))
"""


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_export_reloaded_in_a_fresh_process_reproduces_the_test_metrics(trained, data):
    from trainer.tasks.regression.scores import correlation_metrics

    rows = read_csv(data["test"])
    fresh = subprocess.run(
        [sys.executable, "-c", READER, str(trained["job_dir"] / "model"), json.dumps([r["sentence"] for r in rows])],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert fresh.returncode == 0, fresh.stderr
    scores = np.array(json.loads(fresh.stdout.strip().splitlines()[-1]))
    exported = correlation_metrics(scores, np.array([float(r["score"]) for r in rows]))
    evaluated = metrics_of(trained["job_dir"])["test"]
    for key in ("pearson", "spearman", "mse", "mae"):
        assert exported[key] == pytest.approx(evaluated[key], rel=1e-4, abs=1e-5), key


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_predict_writes_a_predicted_score_per_row_in_input_order(trained, data, tmp_path):
    output = tmp_path / "scores.csv"
    result = run_cli(
        "--model-dir",
        trained["job_dir"] / "model",
        "--input",
        data["test"],
        "--output",
        output,
        "--batch-size",
        "7",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    rows, given = read_csv(output), read_csv(data["test"])
    assert list(rows[0]) == ["sentence", "score", "predicted_score", "note"]
    assert [r["sentence"] for r in rows] == [r["sentence"] for r in given]
    errors = [float(r["predicted_score"]) - float(r["score"]) for r in rows]
    assert np.mean(np.square(errors)) == pytest.approx(metrics_of(trained["job_dir"])["test"]["mse"], rel=1e-4)


@pytest.mark.slow
def test_a_run_killed_after_its_second_epoch_resumes_and_ends_like_an_uninterrupted_one(
    trained, tiny_encoder_dir, data, tmp_path
):
    job_dir = tmp_path / "killed"
    kill_after_second_epoch(args(tiny_encoder_dir, data, job_dir), job_dir)
    assert not (job_dir / "metrics.json").exists()
    rerun = run_cli(*args(tiny_encoder_dir, data, job_dir))
    assert rerun.returncode == 0, rerun.stderr
    assert "resumed after epoch 2" in rerun.stdout
    resumed, uninterrupted = metrics_of(job_dir), metrics_of(trained["job_dir"])
    for key in ("pearson", "spearman", "mse", "mae"):
        assert resumed["test"][key] == pytest.approx(uninterrupted["test"][key], rel=1e-4, abs=1e-5)


# --- bad input: one line naming the row or flag, exit 2 ------------------------------------------


@pytest.fixture(scope="module")
def bad_scores(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_scores")
    rows = scored_rows(20, 5)
    rows[6] = (rows[6][0], "very good")
    return write_csv(root / "train.csv", rows, ("sentence", "score"))


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--label-names", "a,b"), "--label-names: has no meaning with --task regression"),
        (("--selection-metric", "val_macro_f1"), "--selection-metric: val_macro_f1 is not a regression metric"),
        (("--class-weights", "balanced"), "--class-weights: 'balanced' needs classes"),
    ],
)
def test_classification_flags_are_refused_with_regression(tiny_encoder_dir, data, tmp_path, flags, message):
    result = run_in_process(*args(tiny_encoder_dir, data, tmp_path / "job", *flags))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}")


def test_a_non_numeric_score_names_its_row(tiny_encoder_dir, data, bad_scores, tmp_path):
    result = run_in_process(*args(tiny_encoder_dir, {**data, "train": bad_scores}, tmp_path / "job"))
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line == (
        f"error: {bad_scores} line 8, column 'score': 'very good' is not a number "
        f"(--task regression reads the label as a score)"
    )


def test_scores_that_never_vary_are_refused(tiny_encoder_dir, data, tmp_path):
    constant = write_csv(tmp_path / "train.csv", [(t, 3) for t, _ in scored_rows(20, 6)], ("sentence", "score"))
    result = run_in_process(*args(tiny_encoder_dir, {**data, "train": constant}, tmp_path / "job"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: training labels: every score is 3; regression needs scores that vary"
    )


@pytest.mark.slow
def test_a_bfloat16_dry_run_on_the_static_shape_path_checks_the_whole_job(tiny_encoder_dir, data, tmp_path):
    result = run_cli(
        *args(
            tiny_encoder_dir,
            data,
            tmp_path / "job",
            "--static-shapes",
            "on",
            "--mixed-precision",
            "bfloat16",
            "--dry-run",
            "--batch-size",
            "6",
        )
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert metrics_of(tmp_path / "job")["epochs_completed"] == 1


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_run_reports_predicted_against_true_residuals_and_correlations(trained):
    from matplotlib import image as mpimg

    job_dir, test = trained["job_dir"], metrics_of(trained["job_dir"])["test"]
    for figure in ("learning_curves.png", "predicted_vs_true.png", "residuals.png"):
        assert mpimg.imread(job_dir / "report" / figure)[..., :3].std() > 0.05, figure
    page = (job_dir / "report.html").read_text()
    for key in ("spearman", "pearson", "mse", "mae"):
        assert f'<td class="num">{test[key]:.4f}</td>' in page, key
    assert "Calibration" not in page
    assert f"Spearman {test['spearman']:.4f}" in (job_dir / "MODEL_CARD.md").read_text()


@pytest.mark.slow
def test_the_report_command_lists_the_largest_absolute_errors_first(trained, data):
    from trainer.inference import loaded_model
    from trainer.serving import export

    result = run_cli("--job-dir", trained["job_dir"], "--report-errors", "5", module="trainer.report")
    assert result.returncode == 0, result.stdout + result.stderr
    listed = [r for r in read_csv(trained["job_dir"] / "errors.csv") if r["split"] == "test"]
    rows = read_csv(data["test"])
    scores = loaded_model.predict_outputs(
        export.load(str(trained["job_dir"] / "model")), [r["sentence"] for r in rows], 8, wanted=("score",)
    )["score"]
    errors = np.abs(scores - np.array([float(r["score"]) for r in rows]))
    assert [r["rank"] for r in listed] == ["1", "2", "3", "4", "5"]
    np.testing.assert_allclose(
        [float(r["absolute_error"]) for r in listed], np.sort(errors)[::-1][:5], rtol=1e-4, atol=1e-5
    )
    given = {(r["sentence"], float(r["score"])) for r in rows}
    assert all((r["text"], round(float(r["true_score"]), 3)) in given for r in listed)


@pytest.mark.slow  # the trained regression run (about 35 s of one worker): CI's 2.21 slow line (.ci/run)
def test_the_server_answers_a_score_per_instance_as_predict_does(trained, tmp_path):
    import httpx
    from test_server import HEALTH, PREDICT, Server, environ, free_port

    from trainer.inference import loaded_model
    from trainer.serving import export

    texts = ["so good", "it was awful", "meh"]
    expected = loaded_model.predict_outputs(
        export.load(str(trained["job_dir"] / "model")), texts, 8, wanted=("score",)
    )["score"]
    port = free_port()
    env = {
        **environ(),
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": HEALTH,
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_STORAGE_URI": str(trained["job_dir"] / "model"),
    }
    server = Server([], env, HEALTH, tmp_path / "server.log")
    try:
        server.wait_ready(port)
        response = httpx.post(server.url(port, PREDICT), json={"instances": texts}, timeout=60)
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    got = [p["score"] for p in response.json()["predictions"]]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_the_tuning_metric_may_be_named_without_its_val_prefix():
    from trainer import config, task_registry

    built = config.build_config(["--task", "regression", "--hypertune-metric", "spearman"], {})
    assert built.train.selection_metric == "val_spearman"
    assert task_registry.metric_goals()["val_spearman"] == "maximize"
    assert task_registry.metric_goals()["val_mse"] == task_registry.metric_goals()["val_mae"] == "minimize"
