"""--target-precision / --target-recall: the threshold chosen on validation, stored in the export,
applied by trainer.predict, the server's batch function and the bfloat16 copy; bad combinations
stop up front."""

import json

import numpy as np
import pytest
from conftest import TINY_TASK_FLAGS, metrics_of, read_csv, write_csv
from test_task import run_cli, run_in_process

from trainer import task_registry
from trainer.config import OutputConfig
from trainer.errors import UserError
from trainer.tasks.classification import ClassificationTask
from trainer.tasks.classification.metrics import positive_margin
from trainer.training.operating_point import check_task, choose_threshold, rates_at

# Eight validation rows, scores ascending; positives at 0.3, 0.6, 0.8 and 0.9.
SCORES = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
TRUTH = np.array([0, 0, 1, 0, 1, 0, 1, 1])


def test_target_precision_takes_the_lowest_threshold_reaching_it():
    # At 0.6 and up: 3 of 4 predicted rows are positive (0.75); at 0.4: 3 of 5. Halfway below 0.6.
    chosen = choose_threshold(SCORES, TRUTH, "precision", 0.75)
    assert chosen == {"reached": True, "threshold": 0.5, "precision": 0.75, "recall": 0.75}


def test_target_recall_takes_the_highest_threshold_reaching_it():
    # Every positive needs 0.3 and up; the threshold sits halfway between 0.2 and 0.3.
    chosen = choose_threshold(SCORES, TRUTH, "recall", 1.0)
    assert chosen["reached"] and chosen["threshold"] == pytest.approx(0.25)
    assert (chosen["precision"], chosen["recall"]) == (pytest.approx(4 / 6), 1.0)


def test_the_threshold_makes_the_validation_decisions_it_reports():
    chosen = choose_threshold(SCORES, TRUTH, "precision", 0.75)
    assert rates_at(SCORES, TRUTH, chosen["threshold"]) == {"precision": 0.75, "recall": 0.75}


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_the_logit_margin_decides_as_the_exported_probability_at_the_threshold(temperature):
    logits = np.random.default_rng(0).normal(0, 3, size=(500, 2))
    probability = 1 / (1 + np.exp(-(logits[:, 1] - logits[:, 0]) / temperature))  # softmax(z / T)[1]
    task = ClassificationTask()
    task.positive_margin = positive_margin(0.8, temperature)
    assert np.array_equal(task.decide(logits), (probability >= 0.8).astype(np.int64))


def test_a_thresholded_binary_models_metrics_count_its_decisions_not_the_most_probable_class():
    logits = np.array([[0.0, -0.5], [0.0, 1.0], [0.0, -2.0]])  # class 1 probability .38, .73, .12
    labels = np.array([1, 1, 0])
    task = ClassificationTask()
    assert task.summarize(logits, labels, ["negative", "positive"])["accuracy"] == pytest.approx(2 / 3)
    task.positive_margin = positive_margin(0.3, 1.0)
    result = task.summarize(logits, labels, ["negative", "positive"])
    assert result["accuracy"] == 1.0 and result["confusion_matrix"] == [[1, 0], [0, 2]]


def test_an_unreachable_precision_says_what_validation_reached():
    chosen = choose_threshold(np.array([0.2, 0.9]), np.array([1, 0]), "precision", 0.9)
    assert not chosen["reached"] and chosen["threshold"] is None
    assert chosen["precision"] == 0.5 and "highest validation precision is 0.5000" in chosen["why"]


def test_validation_without_positive_rows_reaches_no_target():
    chosen = choose_threshold(SCORES, np.zeros(8), "recall", 0.5)
    assert not chosen["reached"] and chosen["why"] == "no positive rows in validation"


def test_a_classifier_of_three_classes_is_refused():
    with pytest.raises(
        UserError,
        match=r"^--target-precision: needs a binary or multi-label task; "
        r"this classifier has 3 classes \(a, b, c\)",
    ):
        check_task(task_registry.by_name("classification"), ["a", "b", "c"], OutputConfig(target_precision=0.9))


def test_regression_is_refused():
    with pytest.raises(
        UserError,
        match=r"^--target-recall: needs a binary or multi-label task; "
        r"--task regression has no yes/no decision a threshold can move$",
    ):
        check_task(task_registry.by_name("regression"), [], OutputConfig(target_recall=0.8))


def test_binary_and_multi_label_tasks_are_accepted():
    check_task(task_registry.by_name("classification"), ["no", "yes"], OutputConfig(target_recall=0.8))
    check_task(task_registry.by_name("multi-label"), ["a", "b", "c"], OutputConfig(target_precision=0.8))


def test_the_three_class_run_stops_before_training_with_one_error_line(tiny_encoder_dir, tiny_data, tmp_path):
    result = run_in_process(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--job-dir",
        tmp_path / "job",
        "--max-seq-length",
        "16",
        "--target-precision",
        "0.9",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --target-precision: needs a binary or multi-label task; this classifier has 3 "
        "classes (negative, neutral, positive), and a threshold picks between two"
    ]
    assert not (tmp_path / "job" / "model").exists()


# --- an export with a threshold ------------------------------------------------------------------

TEXTS = [
    "i love this movie",
    "so bad",
    "great movie",
    "it was awful",
    "meh",
    "very good !",
    "the movie is ok",
    "hate it so",
]
LABELS = ["neg", "pos"]


@pytest.fixture(scope="module")
def thresholded(tiny_encoder_dir, tmp_path_factory):
    """(model dir, threshold): the tiny encoder with a binary head whose probability of `pos`
    is below 0.5 for every text, exported with the median of those probabilities as threshold:
    the threshold, not the most probable class, makes half of the texts `pos`."""
    from trainer.inference import loaded_model
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export

    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    model = heads.build_classifier(encoder.network, 2, "mean", dropout=0.0)
    head = model.get_layer("logits")
    kernel, _ = head.get_weights()
    rng = np.random.default_rng(0)
    head.set_weights([rng.normal(0, 0.3, kernel.shape).astype(np.float32), np.array([2.0, -2.0], np.float32)])
    plain = export.ServingModule(encoder.preprocessor, model, LABELS, 16)
    positive = loaded_model.predict_texts(plain, TEXTS, 4)[0][:, 1]
    assert positive.max() < 0.5, positive  # argmax alone would say `neg` for every text
    threshold = float(np.median(positive))
    model_dir = tmp_path_factory.mktemp("thresholded") / "model"
    export.export(
        export.ServingModule(encoder.preprocessor, model, LABELS, 16, decisions={"threshold": threshold}),
        str(model_dir),
    )
    return model_dir, threshold


def expected_labels(probabilities, threshold):
    return [LABELS[int(p >= np.float32(threshold))] for p in probabilities[:, 1]]


# a tiny model trained and exported with a threshold (about 25 s): run by hand (docs/testing.md), not in CI
@pytest.mark.slow
def test_the_export_stores_its_threshold(thresholded):
    from trainer.serving import export

    model_dir, threshold = thresholded
    assert float(export.load_module(str(model_dir)).threshold.numpy()) == pytest.approx(threshold)


# a tiny model trained and exported with a threshold (about 25 s): run by hand (docs/testing.md), not in CI
@pytest.mark.slow
def test_trainer_predict_writes_the_class_the_threshold_decides(thresholded, tmp_path):
    model_dir, threshold = thresholded
    rows = write_csv(tmp_path / "in.csv", [(text,) for text in TEXTS], ("text",))
    result = run_in_process(
        "--model-dir", model_dir, "--input", rows, "--output", tmp_path / "out.csv", module="trainer.predict"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = read_csv(tmp_path / "out.csv")
    probabilities = np.array([[float(r["probability_neg"]), float(r["probability_pos"])] for r in out])
    predicted = [r["predicted_label"] for r in out]
    assert predicted == expected_labels(probabilities, threshold)
    assert "pos" in predicted  # below 0.5, yet at or above the threshold


# a tiny model trained and exported with a threshold (about 25 s): run by hand (docs/testing.md), not in CI
@pytest.mark.slow
def test_the_servers_predictions_apply_the_threshold(thresholded):
    from trainer.serving import export, protocol

    model_dir, threshold = thresholded
    answers, _ = protocol.predict_instances(export.load_module(str(model_dir)), TEXTS, 4)
    probabilities = np.array([[a["probabilities"]["neg"], a["probabilities"]["pos"]] for a in answers])
    assert [a["label"] for a in answers] == expected_labels(probabilities, threshold)
    assert "pos" in [a["label"] for a in answers]


# a tiny model trained and exported with a threshold (about 25 s): run by hand (docs/testing.md), not in CI
@pytest.mark.slow
def test_the_bfloat16_copy_is_built_with_the_exports_threshold(thresholded, tiny_encoder_dir):
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.serving import export, quantize

    model_dir, threshold = thresholded
    reference = export.load_module(str(model_dir))
    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    model = heads.build_classifier(encoder.network, 2, "mean", dropout=0.0)
    copy = quantize.module_like(reference, encoder.preprocessor, model, ClassificationTask(), LABELS, 16, False)
    assert float(copy.threshold.numpy()) == pytest.approx(threshold)


# --- end to end ----------------------------------------------------------------------------------


def binary_rows(count, seed):
    from conftest import labelled_rows

    return [(text, label) for text, label in labelled_rows(count, seed) if label != "neutral"]


@pytest.mark.slow  # a real run: run by hand (docs/testing.md), not in CI
def test_a_binary_run_exports_the_threshold_metrics_json_records(tiny_encoder_dir, tmp_path):
    files = {
        name: write_csv(tmp_path / f"{name}.csv", binary_rows(count, seed))
        for name, count, seed in (("train", 90, 1), ("validation", 45, 2), ("test", 30, 3))
    }
    job_dir = tmp_path / "job"
    result = run_cli(
        "--encoder",
        tiny_encoder_dir,
        "--training-file",
        files["train"],
        "--validation-file",
        files["validation"],
        "--testing-file",
        files["test"],
        "--job-dir",
        job_dir,
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--learning-rate",
        "1e-2",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "off",
        *TINY_TASK_FLAGS,
        "--target-recall",
        "1.0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = metrics_of(job_dir)
    point = metrics["operating_point"]
    assert point["target"] == "recall" and point["positive_label"] == "positive"
    assert point["reached"] and point["validation"]["recall"] == 1.0 and "test" in point
    # the final metrics are the thresholded model's, as users get it
    assert metrics["test"]["per_class"]["positive"]["recall"] == pytest.approx(point["test"]["recall"])
    assert metrics["validation"]["per_class"]["positive"]["recall"] == 1.0
    from trainer.serving import export

    assert float(export.load_module(str(job_dir / "model")).threshold.numpy()) == pytest.approx(point["threshold"])
    assert "operating point: positive class 'positive' threshold" in result.stdout
    last_validation_line = [line for line in result.stdout.splitlines() if " validation loss " in line][-1]
    assert f"accuracy {metrics['validation']['accuracy']:.4f}" in last_validation_line
    assert (job_dir / "report" / "precision_recall.png").exists()
    json.loads((job_dir / "metrics.json").read_text())  # strict JSON: no NaN


def finished_training(task, names, outputs, **flags):
    """A run's context as `results.evaluate` leaves it (no temperature applied): the task, its
    label names and each split's (outputs, labels), with the --target-* `flags`."""
    from types import SimpleNamespace

    from trainer.config import Config

    config = Config()
    for flag, value in flags.items():
        setattr(config.output, flag, value)
    return SimpleNamespace(
        config=config,
        task=task,
        outputs=outputs,
        calibration=None,
        results={},
        operating_point=None,
        datasets=SimpleNamespace(labels=SimpleNamespace(names=names)),
        inputs=SimpleNamespace(
            eval_sets=dict.fromkeys(outputs), tokenized={name: labels for name, (_, labels) in outputs.items()}
        ),
        fit=SimpleNamespace(hypertune=None),
    )


def logits_of(probabilities):
    probabilities = np.asarray(probabilities, np.float64)
    return np.log(probabilities / (1 - probabilities))


def test_each_label_of_a_multi_label_model_gets_its_own_threshold_or_keeps_its_f1_one():
    """Label `a` reaches precision 1 above its negatives; `b`'s top-scored row is a negative,
    so precision 1 is out of reach and `b` keeps its F1-chosen threshold. The final metrics
    are computed at the thresholds the export stores."""
    from trainer.data.labels import LabelSpec
    from trainer.tasks.multilabel import MultiLabelTask
    from trainer.training.operating_point import choose_operating_point
    from trainer.training.results import summarize

    probabilities = np.array([[0.9, 0.95], [0.7, 0.2], [0.4, 0.8], [0.2, 0.1]])
    labels = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    task = MultiLabelTask()
    task.prepare(LabelSpec("names", ["a", "b"]), labels)  # as a run's task is, before training
    task.thresholds = np.array([0.5, 0.3])
    ctx = finished_training(task, ["a", "b"], {"validation": (logits_of(probabilities), labels)}, target_precision=1.0)
    choose_operating_point(ctx)
    point = ctx.operating_point["labels"]
    assert point["a"]["reached"] and point["a"]["threshold"] == pytest.approx(0.55)
    assert not point["b"]["reached"] and point["b"]["threshold"] is None
    assert list(task.thresholds) == [pytest.approx(0.55), 0.3]
    summarize(ctx)
    assert ctx.results["validation"]["thresholds"] == {"a": pytest.approx(0.55), "b": 0.3}
    assert ctx.results["validation"]["caveat"].startswith("optimistic")


def test_the_final_log_lines_say_what_metrics_json_records_at_the_threshold(caplog):
    """Issue #49: the last log lines printed the metrics of the most probable class (validation
    accuracy 0.675) while metrics.json held those at the --target-precision threshold (0.65).
    The metrics are now computed once, after the operating point, and logged as recorded."""
    from trainer.training import results, run
    from trainer.training.operating_point import choose_operating_point

    # Every positive probability is below 0.5: the most probable class is right on 1 row of 4;
    # --target-recall 1.0 puts the threshold at 0.25, which gets all 4 right.
    validation = (np.stack([np.zeros(4), logits_of([0.2, 0.3, 0.4, 0.45])], axis=1), np.array([0, 1, 1, 1]))
    ctx = finished_training(ClassificationTask(), ["neg", "pos"], {"validation": validation}, target_recall=1.0)
    stages = [stage.__name__ for stage in run.STAGES]
    assert stages.index("choose_operating_point") < stages.index("summarize") < stages.index("report")
    with caplog.at_level("INFO", logger="trainer"):
        choose_operating_point(ctx)
        results.summarize(ctx)
    logged = [record.getMessage() for record in caplog.records]
    assert ctx.results["validation"]["accuracy"] == 1.0  # at the threshold, not 0.25
    assert logged[-2] == f"validation {ctx.task.describe(ctx.results['validation'])}  (4 examples)"
    assert logged[-1].strip().startswith("optimistic: the decision threshold was chosen on this split")
    assert "threshold 0.2500" in logged[0] and "the export and the metrics below decide there" in logged[0]


def test_validation_figures_at_a_chosen_threshold_say_they_are_optimistic():
    """The threshold reaches its target on validation by construction (as multi-label's
    per-label thresholds do, which metrics.json already flags)."""
    from trainer.tasks.classification import ClassificationTask

    task = ClassificationTask()
    assert task.validation_caveat(has_test=True) is None
    task.positive_margin = 0.3
    assert task.validation_caveat(has_test=True).startswith("optimistic: the decision threshold")
    assert "give --testing-file" in task.validation_caveat(has_test=False)
