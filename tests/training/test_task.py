"""`python -m trainer.task` end to end on a tiny encoder, the way a user runs it."""

import contextlib
import csv
import io
import json
import logging
import os
import re
import runpy
import subprocess
import sys
import warnings
from importlib.metadata import version
from unittest import mock

import numpy as np
import pytest
from conftest import NO_EXTRAS, TINY_TASK_FLAGS, without_extras

HERE = os.path.dirname(__file__)


def run_cli(*args, module="trainer.task", timeout=300, env=None):
    environ = {**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", module, *without_extras(module, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
    )


def run_in_process(*args, module="trainer.task", env=None):
    """`python -m MODULE ARGS` for a command that stops with an error before it trains, run in
    this process (runpy, as `-m` runs it), with its exit code, stdout and stderr returned as
    run_cli returns them. It saves a Python and TensorFlow start (about 5 s) per case; what the
    real process prints is checked with run_cli (test_bad_input_exits_2_with_one_clear_line)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    environ = {"VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache"), **(env or {})}
    with (
        mock.patch.dict(os.environ, environ),
        mock.patch.object(sys, "argv", [module, *without_extras(module, args)]),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(),
        trainer_logger_restored(),
    ):
        try:
            runpy.run_module(module, run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    return subprocess.CompletedProcess([module, *args], code, stdout.getvalue(), stderr.getvalue())


@contextlib.contextmanager
def trainer_logger_restored():
    """cli.setup_logging stops the trainer's logger propagating (to keep a run's lines off the
    root logger); later tests in this process read it through caplog, which needs propagation."""
    logger = logging.getLogger("trainer")
    saved = logger.handlers[:], logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def train_args(tiny_encoder_dir, tiny_data, job_dir, *extra):
    return [
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--testing-file",
        tiny_data["test"],
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
        "--log-every-seconds",
        "1",
        "--seed",
        "2",  # not the default, so metrics.json is seen to record the flag
        *TINY_TASK_FLAGS,
        *NO_EXTRAS,
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, tiny_data, tmp_path_factory):
    job_dir = tmp_path_factory.mktemp("run") / "job"
    # A progress line after every step (the later flag wins): a fast CPU runs an epoch of this
    # tiny run in under train_args' 1 s interval, which left no progress line to test.
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir, "--log-every-seconds", "0.000001"))
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result


def test_a_run_writes_every_artifact(trained):
    job_dir, _ = trained
    for name in (
        "config.json",
        "metrics.json",
        "eval_history.csv",
        "training.log",
        "model/saved_model.pb",
        "tensorboard",
        "report.html",
        "errors.csv",
        "MODEL_CARD.md",
        "report/learning_curves.png",
    ):
        assert (job_dir / name).exists(), name


def test_export_copies_off_writes_no_copy(trained):
    """(run_cli adds --export-bfloat16 off --export-int8 off; tests/serving/test_precisions.py runs with
    the copies.)"""
    job_dir, _ = trained
    assert json.loads((job_dir / "metrics.json").read_text())["precisions"] == {}
    assert not (job_dir / "model" / "bfloat16").exists() and not (job_dir / "model" / "int8").exists()


def test_a_finished_run_keeps_no_checkpoints_by_default(trained):
    job_dir, result = trained
    assert not (job_dir / "checkpoints").exists()
    assert "--keep-checkpoints none" in result.stdout


def test_metrics_json_holds_what_users_read(trained):
    metrics = json.loads((trained[0] / "metrics.json").read_text())
    for split in ("train", "validation", "test"):
        m = metrics[split]
        assert {"loss", "accuracy", "macro_f1", "macro_recall", "per_class", "confusion_matrix"} <= set(m)
        assert set(m["per_class"]) == {"negative", "neutral", "positive"}
        assert set(m["per_class"]["neutral"]) == {"precision", "recall", "f1", "support"}
        assert np.array(m["confusion_matrix"]).sum() == metrics["dataset_sizes"][split]
    assert metrics["labels"] == ["negative", "neutral", "positive"]
    assert metrics["dataset_sizes"] == {"train": 90, "validation": 30, "test": 30}
    assert metrics["train_sample"] == {"rows": 90, "of": 90, "seed": 2, "note": "every training row"}
    assert metrics["rows_skipped"] == {"train": 0, "validation": 0, "test": 0}
    assert {name: block["checked"] for name, block in metrics["contained_texts"].items()} == {
        "validation": 30,
        "test": 30,
    }
    assert metrics["hyperparameters"]["learning_rate"] == 1e-2
    assert {"total", "train", "evaluate", "export"} <= set(metrics["durations"])
    assert metrics["train_examples_per_second"] > 0
    assert metrics["versions"]["tensorflow"] == version("tensorflow")
    assert metrics["device"]["strategy"] == "default"


def test_metrics_json_breaks_the_evaluated_splits_down_by_text_length(trained):
    metrics = json.loads((trained[0] / "metrics.json").read_text())
    for split in ("validation", "test"):
        by_length = metrics[split]["by_length"]
        assert [b["tokens"] for b in by_length.values()] == ["up to 16", "17-64", "over 64"]
        assert sum(b["examples"] for b in by_length.values()) == metrics["dataset_sizes"][split]
        cut = by_length["1x_to_4x"]["examples"] + by_length["over_4x"]["examples"]
        assert cut == metrics["truncated_texts"][split]


def test_the_export_applies_the_temperature_fitted_on_validation(trained):
    calibration = json.loads((trained[0] / "metrics.json").read_text())["calibration"]
    # Applied only inside its search bound and when it lowers the validation log loss and ECE
    # (trainer.reporting.calibration.decide, whose reason metrics.json keeps).
    validation = calibration["validation"]
    lowers = validation["ece_after"] < validation["ece_before"] and validation["nll_after"] < validation["nll_before"]
    assert calibration["temperature"] > 0
    assert calibration["applied"] == (not calibration["at_bound"] and lowers), calibration["why"]
    for split in ("validation", "test"):
        assert {"ece_before", "ece_after", "brier_before", "brier_after"} <= set(calibration[split])


def test_the_tiny_model_learns_the_tiny_task(trained):
    metrics = json.loads((trained[0] / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] >= 0.8


def test_history_has_one_row_per_epoch(trained):
    with open(trained[0] / "eval_history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [int(r["step"]) for r in rows] == [12, 24, 36, 48, 60, 72]  # 90 rows, batches of 8
    assert set(rows[0]) == {
        "epoch",
        "step",
        "loss",
        "accuracy",
        "val_loss",
        "val_accuracy",
        "val_macro_f1",
        "val_macro_recall",
        "learning_rate",
        "seconds",
    }


def test_log_has_progress_lines_and_no_tensorflow_noise(trained):
    job_dir, result = trained
    log = (job_dir / "training.log").read_text()
    assert "ex/s" in log and "ETA" in log and "macro-F1" in log
    assert "Traceback" not in result.stderr
    assert "WARNING" not in result.stdout


def test_config_json_is_the_resolved_config(trained):
    from trainer import config as config_lib

    config = config_lib.load(str(trained[0] / "config.json"))
    assert config.train.epochs == 6 and config.output.job_dir == str(trained[0])


READER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = serve(text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                  "label": [x.decode() for x in out["label"].numpy()]}))
"""

TEXTS = ["i love this movie", "this movie is awful !", "it was fine", "UNSEEN words here", ""]


def test_export_reloads_in_a_fresh_process_with_identical_predictions(trained):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    model_dir = str(trained[0] / "model")
    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    here = serve(text=tf.constant(TEXTS))
    fresh = subprocess.run(
        [sys.executable, "-c", READER, model_dir, json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert fresh.returncode == 0, fresh.stderr
    there = json.loads(fresh.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.array(there["probabilities"], np.float32), here["probabilities"].numpy())
    assert there["label"][:2] == ["positive", "negative"]


def test_exported_model_reproduces_the_test_metrics(trained, tiny_data):
    from trainer.serving import export

    serve = export.load(str(trained[0] / "model"))
    with open(tiny_data["test"]) as f:
        rows = list(csv.DictReader(f))
    out = serve(text=np.array([r["text"] for r in rows], dtype=object))
    predicted = [x.decode() for x in out["label"].numpy()]
    accuracy = np.mean([p == r["label"] for p, r in zip(predicted, rows)])
    metrics = json.loads((trained[0] / "metrics.json").read_text())
    assert accuracy == pytest.approx(metrics["test"]["accuracy"])


def test_predict_adds_label_and_probabilities_in_input_order(trained, tiny_data, tmp_path):
    output = tmp_path / "predictions.csv"
    result = run_cli(
        "--model-dir",
        trained[0] / "model",
        "--input",
        tiny_data["test"],
        "--output",
        output,
        "--batch-size",
        "7",
        module="trainer.predict",
    )
    assert result.returncode == 0, result.stderr
    with open(output) as f:
        rows = list(csv.DictReader(f))
    with open(tiny_data["test"]) as f:
        original = list(csv.DictReader(f))
    assert [r["text"] for r in rows] == [r["text"] for r in original]
    for row in rows:
        probabilities = [float(row[f"probability_{n}"]) for n in ("negative", "neutral", "positive")]
        assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
        assert row["predicted_label"] == ("negative", "neutral", "positive")[int(np.argmax(probabilities))]


def test_a_finished_run_is_not_overwritten(trained, tiny_encoder_dir, tiny_data):
    job_dir = trained[0]
    before = (job_dir / "metrics.json").read_text()
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, job_dir))
    assert result.returncode == 2
    assert "holds a finished run" in result.stderr and "--overwrite" in result.stderr
    assert (job_dir / "metrics.json").read_text() == before
    assert "error:" not in (job_dir / "training.log").read_text()  # the finished run's log is its own


@pytest.mark.slow
def test_same_seed_gives_same_metrics(trained, tiny_encoder_dir, tiny_data, tmp_path):
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, tmp_path / "again"))
    assert result.returncode == 0, result.stdout + result.stderr
    first = json.loads((trained[0] / "metrics.json").read_text())
    second = json.loads((tmp_path / "again" / "metrics.json").read_text())
    for split in ("validation", "test"):
        assert second[split]["loss"] == pytest.approx(first[split]["loss"], rel=1e-5)
        assert second[split]["confusion_matrix"] == first[split]["confusion_matrix"]


@pytest.fixture(scope="module")
def dry_run(tiny_encoder_dir, tiny_data, tmp_path_factory):
    """One --dry-run without --learning-rate: the rate then comes from the encoder's width."""
    job_dir = tmp_path_factory.mktemp("dry") / "job"
    args = train_args(tiny_encoder_dir, tiny_data, job_dir, "--dry-run")
    del args[args.index("--learning-rate") : args.index("--learning-rate") + 2]
    result = run_cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return job_dir, result, json.loads((job_dir / "metrics.json").read_text())


def test_dry_run_checks_the_whole_job_in_one_step(dry_run):
    job_dir, result, metrics = dry_run
    assert metrics["epochs_completed"] == 1
    assert (job_dir / "model" / "saved_model.pb").exists()
    # A few rows of every split, each evaluated whole: not one bucket's single example.
    assert metrics["validation"]["examples"] == metrics["dataset_sizes"]["validation"] == 8
    assert "(--dry-run: one step)" in result.stdout


def test_without_a_learning_rate_the_run_takes_the_one_for_its_encoders_width(dry_run):
    _, result, metrics = dry_run
    assert metrics["hyperparameters"]["learning_rate"] == 3e-4  # the tiny encoder is 16 wide
    assert metrics["hyperparameters"]["layer_decay"] == 0.8
    assert "peak learning rate 0.0003, layer decay 0.8" in result.stdout


def test_a_dry_runs_job_dir_says_so_in_metrics_json_the_model_card_and_the_report(dry_run):
    """Issue #37, 10 (the rules: tests/training/test_jobdir.py, tests/reporting/test_dry_run.py)."""
    job_dir, _, metrics = dry_run
    assert metrics["dry_run"] is True
    assert "A dry run, not a trained model." in (job_dir / "MODEL_CARD.md").read_text()
    assert "A dry run, not a trained model." in (job_dir / "report.html").read_text()


@pytest.mark.slow
def test_train_fraction_trains_on_a_stratified_subset(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_cli(
        *train_args(tiny_encoder_dir, tiny_data, tmp_path / "part", "--train-fraction", "0.5", "--epochs", "1")
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads((tmp_path / "part" / "metrics.json").read_text())
    assert metrics["dataset_sizes"]["train"] == 45
    assert metrics["train"]["per_class"]["neutral"]["support"] == 15


@pytest.mark.slow
def test_train_metrics_of_a_larger_training_set_come_from_a_seeded_sample(tiny_encoder_dir, tiny_data, tmp_path):
    # The same run as a user's, with the sample size lowered from 2,000 to 40 of the 90 rows.
    code = (
        "import sys; from trainer import task; from trainer.training import results; "
        "results.TRAIN_EVALUATION_ROWS = 40; sys.exit(task.main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            *map(str, train_args(tiny_encoder_dir, tiny_data, tmp_path / "job", "--epochs", "1")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text())
    assert {k: metrics["train_sample"][k] for k in ("rows", "of", "seed")} == {"rows": 40, "of": 90, "seed": 2}
    assert metrics["train"]["examples"] == np.array(metrics["train"]["confusion_matrix"]).sum() == 40
    assert "(40 examples of 90: a sample seeded with --seed)" in result.stdout


# A run whose prediction passes are counted by split; the report's own pass is refused.
COUNTED_RUN = """
import json, sys
from trainer import task
from trainer.reporting import build
from trainer.training import fitting, results
passes, predict = [], fitting.predict_split
def counted(ctx, name, *args):
    passes.append(name)
    return predict(ctx, name, *args)
def refused(*args, **kwargs):
    raise AssertionError("the report predicted again")
fitting.predict_split = results.predict_split = counted
build.recompute = refused
code = task.main(sys.argv[1:])
print("PASSES", json.dumps(passes))
sys.exit(code)
"""


@pytest.mark.slow  # a run of its own, by hand (.ci/run's BY_HAND)
def test_after_training_each_split_is_predicted_once_and_the_report_reuses_it(tiny_encoder_dir, tiny_data, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            COUNTED_RUN,
            *map(
                str,
                train_args(
                    tiny_encoder_dir, tiny_data, tmp_path / "job", "--epochs", "3", "--log-every-seconds", "0.001"
                ),
            ),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VBT_CACHE_DIR": os.environ.get("VBT_CACHE_DIR", "/tmp/vbt-test-cache")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passes = json.loads(result.stdout.split("PASSES ")[1])
    best = json.loads((tmp_path / "job" / "metrics.json").read_text())["best_epoch"]
    # One validation pass per epoch; after training, validation again only when the best epoch's
    # weights had to be restored, then test and the train sample once each.
    assert passes == ["validation"] * (3 + (best != 3)) + ["test", "train"]
    assert (tmp_path / "job" / "errors.csv").exists() and (tmp_path / "job" / "report.html").exists()
    assert re.search(r"evaluating test \d+/30 rows \(\d+%\)  [\d.,]+ rows/s", result.stdout)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--text-column", "body"], "--text-column: column 'body' is not in"),
        (["--train-fraction", "2"], "--train-fraction: must be in (0, 1]"),
        (["--testing-file", "/nonexistent/test.csv"], "--testing-file: file not found: /nonexistent/test.csv"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(tiny_encoder_dir, tiny_data, tmp_path, extra, message):
    result = run_cli(*train_args(tiny_encoder_dir, tiny_data, tmp_path / "bad", *extra))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {result.stderr.strip()[7:]}"]
    assert message in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_bad_flag_value_is_one_line_naming_the_flag_without_the_usage():
    """Issue #23, 5: argparse printed its 45-line usage before the error."""
    result = run_in_process("--epochs", "three")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --epochs: invalid integer value: 'three' (see python -m trainer.task --help)"
    ]


@pytest.mark.parametrize(
    "module",
    [
        "trainer.task",
        "trainer.predict",
        "trainer.prepare",
        "trainer.serve",
        "trainer.submit",
        "trainer.report",
        "trainer.export_encoder",
        "trainer.export_quantized",
        "trainer.tune",
    ],
)
def test_every_entry_point_prints_its_version(module):
    from trainer import __version__

    sys.modules.pop(module, None)  # runpy warns when it runs a module this process imported
    result = run_in_process("--version", module=module)
    assert (result.returncode, result.stdout.strip()) == (0, f"vertex-bert-trainer {__version__}")
