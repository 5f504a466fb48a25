"""The report's parts on small deterministic inputs: calibration, worst errors, figures, model card,
HTML. (tests/reporting/test_report.py runs the whole report on a trained run.)"""

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg

from trainer import task_registry
from trainer.config import Config
from trainer.inference.split_predictions import SplitPredictions
from trainer.reporting import calibration, error_rows, figures, html, model_card
from trainer.tasks.classification.metrics import logits_from_probabilities

CLASSIFICATION, REGRESSION, MULTI_LABEL = (
    task_registry.by_name(name) for name in ("classification", "regression", "multi-label")
)

LABELS = ["negative", "neutral", "positive"]


def sampled_model(true_temperature, n=4000, seed=0):
    """Logits z, and labels drawn from softmax(z / true_temperature): a model whose own
    probabilities softmax(z) are over-confident when true_temperature > 1."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 3.0, size=(n, 3))
    truth = calibration.softmax(logits, true_temperature)
    labels = np.array([rng.choice(3, p=p) for p in truth])
    return logits, labels


@pytest.mark.parametrize("true_temperature", [2.5, 0.6])
def test_fitted_temperature_recovers_the_one_that_generated_the_labels(true_temperature):
    logits, labels = sampled_model(true_temperature)
    assert calibration.fit_temperature(logits, labels) == pytest.approx(true_temperature, rel=0.08)


def test_calibrating_an_over_confident_model_lowers_its_ece_on_held_out_data():
    val_logits, val_labels = sampled_model(2.5, seed=1)
    test_logits, test_labels = sampled_model(2.5, seed=2)
    block = calibration.calibration_block(
        {"validation": (val_logits, val_labels), "test": (test_logits, test_labels)}, applied=True
    )
    assert block["temperature"] > 1
    test = block["test"]
    assert test["ece_before"] > 0.1 and test["ece_after"] < 0.03
    assert test["brier_after"] < test["brier_before"] and test["nll_after"] < test["nll_before"]
    assert set(block) == {"temperature", "at_bound", "applied", "why", "bins", "validation", "test"}
    assert not block["at_bound"] and block["applied"]


def test_a_perfectly_separated_validation_set_drives_the_temperature_to_its_bound():
    logits = np.array([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 4.0]])
    block = calibration.calibration_block({"validation": (logits, np.array([0, 1, 2]))}, applied=True)
    assert block["temperature"] == pytest.approx(calibration.MIN_T, rel=1e-3) and block["at_bound"]


def test_a_temperature_at_its_search_bound_is_not_applied_to_the_export():
    # Perfectly separated validation: T runs to MIN_T, which would make every probability 0 or 1.
    logits = np.array([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 4.0]])
    block = calibration.calibration_block({"validation": (logits, np.array([0, 1, 2]))}, applied=True)
    assert block["at_bound"] and block["applied"] is False
    assert block["why"] == "T is at its search bound, which validation cannot support"


def binary_logits(margins):
    """Logits [N, 2] whose positive-class margin z1 - z0 is each of `margins`."""
    margins = np.asarray(margins, np.float64)
    return np.stack([np.zeros_like(margins), margins], axis=1)


def test_a_temperature_that_lowers_the_validation_log_loss_and_ece_is_applied():
    # Four rows at one confidence (0.88), three of them right: T softens it towards 0.75.
    block = calibration.calibration_block(
        {"validation": (binary_logits([2, 2, 2, -2]), np.array([1, 1, 0, 0]))}, applied=True
    )
    validation = block["validation"]
    assert validation["ece_after"] < validation["ece_before"] and validation["nll_after"] < validation["nll_before"]
    assert block["applied"] and block["why"] == "it lowers the validation log loss and ECE"


def test_a_temperature_that_raises_the_validation_ece_is_not_applied():
    """Issue #49: the fitted T was applied while validation ECE rose (0.048 -> 0.077 on MRPC).
    Here four rows are right at margin 2 and one confident mistake sits at margin 4: the log
    loss wants T ~ 3.8, which drags the right rows' confidence far below their accuracy."""
    block = calibration.calibration_block(
        {"validation": (binary_logits([2, 2, 2, 2, 4]), np.array([1, 1, 1, 1, 0]))}, applied=True
    )
    validation = block["validation"]
    assert validation["nll_after"] < validation["nll_before"]  # what T was fitted for
    assert validation["ece_after"] > validation["ece_before"] + 0.1
    assert not block["at_bound"] and block["applied"] is False
    assert block["why"] == "it raises the validation ECE"


def test_a_temperature_that_does_not_lower_the_validation_log_loss_is_not_applied():
    validation = {"ece_before": 0.2, "ece_after": 0.1, "nll_before": 0.5, "nll_after": 0.5}
    assert calibration.decide(validation, at_bound=False, wanted=True) == (
        False,
        "it does not lower the validation log loss",
    )


def test_calibrate_off_records_the_fit_and_says_why_it_is_not_applied():
    block = calibration.calibration_block(
        {"validation": (binary_logits([2, 2, 2, -2]), np.array([1, 1, 0, 0]))}, applied=False
    )
    assert block["temperature"] > 1 and (block["applied"], block["why"]) == (False, "--calibrate off")


def test_a_temperature_a_hair_inside_its_bound_still_counts_as_at_the_bound():
    assert calibration.is_at_bound(calibration.MIN_T * 1.0001)
    assert calibration.is_at_bound(calibration.MAX_T * 0.9999)
    assert not calibration.is_at_bound(calibration.MIN_T * 1.01)


def test_temperature_never_changes_the_predicted_label():
    logits, _ = sampled_model(1.0, n=500)
    for t in (0.3, 1.0, 4.0):
        np.testing.assert_array_equal(calibration.softmax(logits, t).argmax(1), logits.argmax(1))


def test_ece_is_the_count_weighted_gap_between_accuracy_and_confidence():
    # Two filled bins: confidence 0.9 with 2 of 4 right, confidence 0.6 with 1 of 1 right.
    probabilities = np.array([[0.9, 0.1]] * 4 + [[0.6, 0.4]])
    labels = np.array([0, 0, 1, 1, 0])
    expected = (4 * abs(0.5 - 0.9) + 1 * abs(1.0 - 0.6)) / 5
    assert calibration.expected_calibration_error(probabilities, labels) == pytest.approx(expected)
    accuracy, confidence, count = calibration.reliability_bins(probabilities, labels)
    assert count.sum() == 5 and count[13] == 4 and count[8] == 1  # (13/15, 14/15] and (8/15, 9/15]


def test_brier_score_is_zero_when_certain_and_right_and_one_minus_1_over_c_when_uniform():
    labels = np.array([0, 2, 1])
    assert calibration.brier_score(np.eye(3)[labels], labels) == 0.0
    assert calibration.brier_score(np.full((3, 3), 1 / 3), labels) == pytest.approx(2 / 3)


def test_uncalibrated_probabilities_are_recovered_from_a_calibrated_export():
    logits, _ = sampled_model(1.0, n=200)
    exported = calibration.softmax(logits, 1.7).astype(np.float32)  # what the SavedModel returns
    recovered = calibration.softmax(logits_from_probabilities(exported, 1.7))
    np.testing.assert_allclose(recovered, calibration.softmax(logits), atol=1e-5)


def predictions_with_known_losses():
    probabilities = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.05, 0.9, 0.05], [0.3, 0.3, 0.4], [0.6, 0.3, 0.1]])
    labels = np.array([0, 0, 1, 2, 2])
    texts = np.array([f"text {i}, with a comma" for i in range(5)], dtype=object)
    return SplitPredictions(texts, labels, probabilities, np.log(probabilities))


def test_errors_are_the_misclassified_examples_of_each_split_highest_loss_first():
    """Only errors, never a correct prediction (issue #23, 7): rows 1 and 4 of 5 are wrong."""
    p = predictions_with_known_losses()
    frame = error_rows.worst_examples({"validation": p, "test": p}, LABELS, per_split=3, task=CLASSIFICATION)
    losses = -np.log(p.probabilities[np.arange(5), p.labels])
    expected = [1, 4]  # true-label probabilities 0.1, 0.1 (a tie: data order)
    for split in ("validation", "test"):
        rows = frame[frame["split"] == split]
        assert list(rows["text"]) == list(p.texts[expected])
        np.testing.assert_allclose(rows["loss"], losses[expected])
        assert list(rows["rank"]) == [1, 2] and set(rows["outcome"]) == {"error"}
    first = frame.iloc[0]
    assert (first["true_label"], first["predicted_label"], first["probability"]) == ("negative", "positive", 0.8)


def test_the_least_confident_correct_predictions_follow_the_errors_when_asked():
    p = predictions_with_known_losses()
    frame = error_rows.worst_examples({"test": p}, LABELS, per_split=5, task=CLASSIFICATION, correct_per_split=2)
    # correct rows 3, 0, 2 have true-label probabilities 0.4, 0.7, 0.9
    assert list(frame["text"]) == list(p.texts[[1, 4, 3, 0]])
    assert list(frame["outcome"]) == ["error", "error", "correct", "correct"]
    assert list(frame["rank"]) == [1, 2, 1, 2]


def test_errors_csv_counts_the_class_the_export_decided_not_the_most_probable_one():
    p = SplitPredictions(
        np.array(["above the threshold", "below it"], dtype=object),
        np.array([1, 0]),
        np.array([[0.6, 0.4], [0.8, 0.2]], np.float32),
        None,
        predicted=np.array([1, 0]),
    )
    frame = error_rows.worst_examples({"test": p}, ["no", "yes"], per_split=5, task=CLASSIFICATION, correct_per_split=5)
    assert list(zip(frame["text"], frame["outcome"], frame["predicted_label"])) == [
        ("above the threshold", "correct", "yes"),
        ("below it", "correct", "no"),
    ]


def test_a_multilabel_row_is_correct_only_when_its_whole_label_set_is():
    labels = np.array([[1, 0], [0, 1]])
    p = SplitPredictions(
        np.array(["right", "wrong"], dtype=object),
        labels,
        np.array([[0.6, 0.4], [0.6, 0.7]], np.float32),
        None,
        predicted=np.array([[1, 0], [1, 1]]),
    )
    frame = error_rows.worst_examples({"test": p}, ["a", "b"], per_split=5, task=MULTI_LABEL, correct_per_split=5)
    assert list(zip(frame["text"], frame["outcome"])) == [("wrong", "error"), ("right", "correct")]


def test_errors_csv_round_trips_texts_with_commas_and_quotes():
    import pandas as pd

    p = predictions_with_known_losses()
    p.texts[1] = 'she said "no", twice\nthen left'
    frame = error_rows.worst_examples({"test": p}, LABELS, per_split=5, task=CLASSIFICATION)
    read = pd.read_csv(io.StringIO(error_rows.to_csv(frame)), keep_default_na=False)
    assert list(read.columns) == CLASSIFICATION.error_columns
    assert list(read["text"]) == list(frame["text"])


def test_zero_errors_requested_gives_a_header_only_file():
    frame = error_rows.worst_examples(
        {"test": predictions_with_known_losses()}, LABELS, per_split=0, task=CLASSIFICATION
    )
    assert error_rows.to_csv(frame).strip() == ",".join(CLASSIFICATION.error_columns)


def test_regression_errors_are_the_largest_absolute_errors_of_each_split():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    p = SplitPredictions(
        np.array(["a", "b", "c", "d"], dtype=object),
        true,
        None,
        None,
        scores=np.array([1.5, 0.5, 3.0, 5.5], np.float32),
    )
    frame = error_rows.worst_examples({"test": p}, [], per_split=3, task=REGRESSION)
    assert list(frame.columns) == REGRESSION.error_columns
    # |errors| 0.5 1.5 0 1.5: the tie keeps the data's order
    assert list(frame["text"]) == ["b", "d", "a"]
    np.testing.assert_allclose(frame["absolute_error"], [1.5, 1.5, 0.5])
    np.testing.assert_allclose(frame["predicted_score"], [0.5, 5.5, 1.5])
    np.testing.assert_allclose(frame["true_score"], [2.0, 4.0, 1.0])


def test_multilabel_errors_rank_rows_by_their_mean_binary_cross_entropy():
    labels = np.array([[1, 0], [0, 1], [1, 1]])
    probabilities = np.array([[0.9, 0.2], [0.6, 0.3], [0.5, 0.5]], np.float32)
    p = SplitPredictions(
        np.array(["x", "y", "z"], dtype=object),
        labels,
        probabilities,
        None,
        predicted=np.array([[1, 0], [1, 0], [1, 1]]),
    )
    frame = error_rows.worst_examples(
        {"validation": p}, ["sports", "politics"], per_split=3, task=MULTI_LABEL, correct_per_split=3
    )
    assert list(frame.columns) == MULTI_LABEL.error_columns
    expected = {"x": -(np.log(0.9) + np.log(0.8)) / 2, "y": -(np.log(0.4) + np.log(0.3)) / 2, "z": -np.log(0.5)}
    assert list(frame["text"]) == ["y", "z", "x"]
    assert list(frame["outcome"]) == ["error", "correct", "correct"]
    np.testing.assert_allclose(frame["loss"], [expected[t] for t in frame["text"]], rtol=1e-6)
    assert list(frame["true_labels"]) == ["politics", "sports|politics", "sports"]
    assert list(frame["predicted_labels"]) == ["sports", "sports|politics", "sports"]


def test_a_pair_runs_errors_carry_the_second_text():
    p = predictions_with_known_losses()
    p.pairs = np.array([f"pair {i}" for i in range(5)], dtype=object)
    frame = error_rows.worst_examples({"test": p}, LABELS, per_split=2, task=CLASSIFICATION)
    assert list(frame.columns) == CLASSIFICATION.error_columns + ["text_pair"]
    assert list(frame["text_pair"]) == ["pair 1", "pair 4"]


def assert_non_blank_png(png: bytes, min_width=400):
    pixels = mpimg.imread(io.BytesIO(png), format="png")
    assert pixels.shape[1] >= min_width
    assert pixels[..., :3].std() > 0.05  # a blank or one-colour image has ~0


def test_learning_curves_figure_is_a_non_blank_png():
    import pandas as pd

    history = pd.DataFrame(
        {"epoch": [1, 2, 3], "loss": [1.0, 0.6, 0.4], "val_loss": [0.9, 0.7, 0.8], "val_macro_f1": [0.5, 0.7, 0.65]}
    )
    assert_non_blank_png(figures.learning_curves(history, 2, "val_macro_f1"))


def test_learning_curves_of_a_run_evaluated_every_n_steps_are_drawn_against_the_step(monkeypatch):
    import pandas as pd

    history = pd.DataFrame(
        {
            "epoch": [1, 2, 3],
            "step": [30, 60, 90],
            "loss": [1.0, 0.6, 0.4],
            "val_loss": [0.9, 0.7, 0.8],
            "val_macro_f1": [0.5, 0.7, 0.65],
        }
    )
    monkeypatch.setattr(figures, "to_png", lambda figure: figure)  # the figure itself, not its PNG
    for ax in figures.learning_curves(history, 2, "val_macro_f1", by_step=True).axes:
        assert ax.get_xlabel() == "step" and list(ax.get_xticks()) == [30, 60, 90]
        assert ax.get_legend_handles_labels()[1][-1] == "best step (60)"


def test_confusion_matrix_figure_is_a_non_blank_png():
    assert_non_blank_png(figures.confusion_matrices([[5, 1, 0], [2, 3, 1], [0, 0, 0]], LABELS, "test"))


def test_per_class_figure_is_a_non_blank_png():
    per_class = {
        name: {"precision": 0.5 + i / 10, "recall": 0.6, "f1": 0.55, "support": 3} for i, name in enumerate(LABELS)
    }
    assert_non_blank_png(figures.per_class_scores({"validation": per_class, "test": per_class}, LABELS))


def test_reliability_figure_is_a_non_blank_png():
    logits, labels = sampled_model(2.0, n=300)
    png = figures.reliability_diagram(
        calibration.softmax(logits), calibration.softmax(logits, 2.0), labels, "test", 2.0
    )
    assert_non_blank_png(png)


def test_predicted_against_true_figure_is_a_non_blank_png():
    rng = np.random.default_rng(0)
    true = rng.uniform(0, 5, 40)
    by_split = {"validation": (true, true + rng.normal(0, 0.5, 40)), "test": (true, true * 0.8)}
    assert_non_blank_png(figures.predicted_vs_true(by_split))


def test_residual_figure_is_a_non_blank_png():
    rng = np.random.default_rng(1)
    true = rng.uniform(0, 5, 40)
    assert_non_blank_png(figures.residual_histograms({"test": (true, true + rng.normal(0, 0.5, 40))}), min_width=300)


def test_cosine_figure_is_a_non_blank_png():
    rng = np.random.default_rng(2)
    scores = rng.uniform(0, 5, 40)
    cosines = np.clip(scores / 5 + rng.normal(0, 0.2, 40), -1, 1)
    assert_non_blank_png(figures.cosine_histograms({"validation": (scores, cosines)}), min_width=300)


def run_metrics(with_calibration=True):
    per_class = {
        name: {"precision": 0.9, "recall": 0.8, "f1": 0.85, "support": 10 + i} for i, name in enumerate(LABELS)
    }
    split = {
        "examples": 33,
        "loss": 0.4,
        "accuracy": 0.8,
        "macro_f1": 0.85,
        "macro_recall": 0.8,
        "per_class": per_class,
        "confusion_matrix": [[8, 1, 1], [1, 9, 1], [1, 1, 10]],
    }
    metrics = {
        "train": split,
        "validation": split,
        "test": split,
        "labels": LABELS,
        "label_kind": "name",
        "text_column": "text",
        "label_column": "label",
        "dataset_sizes": {"train": 33, "validation": 33, "test": 33},
        "rows_skipped": {"train": 2, "validation": 0, "test": 0},
        "truncated_texts": {"train": 4, "validation": 1, "test": 0},
        "hyperparameters": {
            **Config().to_dict()["train"],
            "dropout": 0.1,
            "max_seq_length": 64,
            "pooling": "mean",
            "encoder": "minilm-l6-h384-uncased",
        },
        "best_epoch": 2,
        "epochs_completed": 3,
        "device": {
            "strategy": "default",
            "platform": "cpu",
            "precision_note": "float32",
            "encoder_backend": "native",
            "encoder_source": "minilm -> /site/model",
        },
        "versions": {"trainer": "0.1.0", "tensorflow": "2.21.0"},
    }
    if with_calibration:
        scores = {
            "ece_before": 0.12,
            "ece_after": 0.03,
            "brier_before": 0.3,
            "brier_after": 0.25,
            "nll_before": 0.5,
            "nll_after": 0.4,
        }
        metrics["calibration"] = {
            "temperature": 1.8,
            "at_bound": False,
            "applied": True,
            "bins": 15,
            "validation": scores,
            "test": scores,
        }
    return metrics


def test_model_card_names_what_users_need_to_judge_and_use_the_model():
    metrics = run_metrics()
    card = model_card.render(metrics, Config(), metrics["calibration"], "gs://bucket/job/model")
    for expected in (
        '"negative", "neutral", "positive"',
        "minilm-l6-h384-uncased",
        "minilm -> /site/model",
        "sample posts shipped in the package",
        "| test | ",
        "| neutral | 0.9000 | 0.8000 | 0.8500 | 11 |",
        "T = 1.8",
        "the exported model applies it",
        "| test | 0.1200 | 0.0300 |",
        "longer than 64 tokens",
        "4 of 33 train texts",
        "English",
        'tf.saved_model.load("gs://bucket/job/model")',
        "python -m trainer.predict --model-dir gs://bucket/job/model",
        "Rows skipped for empty text: train 2.",
    ):
        assert expected in card, expected


def test_model_card_says_when_the_export_is_not_calibrated():
    metrics = run_metrics(with_calibration=False)
    block = {**run_metrics()["calibration"], "applied": False, "fitted_by_report": True}
    card = model_card.render(metrics, Config(), block, "model")
    assert "does **not** apply it" in card and "fitted by `trainer.report`" in card
    assert "search range" not in card


def test_model_card_says_why_the_export_does_not_apply_the_temperature():
    metrics = run_metrics()
    block = {**metrics["calibration"], "applied": False, "why": "it raises the validation ECE"}
    card = model_card.render(metrics, Config(), block, "model")
    assert "does **not** apply it\n(T = 1): it raises the validation ECE." in card


def binary_run_metrics(point):
    """run_metrics of a binary classifier ("negative", "positive") with an operating point."""
    metrics = run_metrics()
    per_class = {name: metrics["test"]["per_class"][name] for name in ("negative", "positive")}
    split = {**metrics["test"], "per_class": per_class, "confusion_matrix": [[9, 1], [2, 8]]}
    return {
        **metrics,
        "labels": ["negative", "positive"],
        "train": split,
        "validation": split,
        "test": split,
        "operating_point": point,
    }


REACHED = {
    "target": "precision",
    "value": 0.9,
    "positive_label": "positive",
    "reached": True,
    "threshold": 0.5294,
    "validation": {"precision": 0.9123, "recall": 0.4012},
    "test": {"precision": 0.8811, "recall": 0.3957},
}


def test_model_card_names_the_threshold_the_export_decides_at():
    """Issue #49: with --target-precision 0.9 the card said the model returns "the most likely
    label" and never named its threshold."""
    card = model_card.render(binary_run_metrics(REACHED), Config(), None, "model")
    what_it_does = card.split("## What it does")[1].split("## Encoder")[0]
    assert (
        'The model predicts "positive" when its probability of "positive" is at least 0.529, '
        'otherwise "negative": a threshold chosen on validation for precision >= 0.9 '
        "(--target-precision 0.9), where it reaches precision 0.912 and recall 0.401 "
        "(test: precision 0.881, recall 0.396)."
    ) in what_it_does
    assert "most likely label" not in card
    metrics_section = card.split("## Metrics on test")[1]
    assert "count the exported model's decisions, at the threshold" in metrics_section


def test_model_card_says_an_unreached_target_leaves_the_model_at_0_5():
    point = {
        "target": "precision",
        "value": 0.99,
        "positive_label": "positive",
        "reached": False,
        "threshold": None,
        "validation": {"precision": 0.95, "recall": 0.1},
        "why": "the highest validation precision is 0.9500",
    }
    card = model_card.render(binary_run_metrics(point), Config(), None, "model")
    assert (
        "--target-precision 0.99 was out of reach on validation (the highest validation "
        'precision is 0.9500), so the model predicts the more probable label: "positive" '
        'when its probability is at least 0.5, otherwise "negative".'
    ) in card


def test_report_html_names_the_threshold_beside_its_precision_recall_curve():
    from types import SimpleNamespace

    from trainer.reporting import precision_recall

    validation = SimpleNamespace(
        probabilities=np.array([[0.8, 0.2], [0.4, 0.6], [0.3, 0.7]]), labels=np.array([0, 1, 1])
    )
    [(name, _, png, note)] = precision_recall.figures(
        binary_run_metrics(REACHED), {"validation": validation}, task_registry.by_name("classification")
    )
    assert name == "precision_recall.png" and png.startswith(b"\x89PNG")
    assert note.startswith(
        'The model predicts "positive" when its probability of "positive" is at least 0.529, otherwise "negative"'
    )


def test_a_multilabel_model_card_names_the_target_and_the_labels_that_missed_it():
    point = {
        "target": "recall",
        "value": 0.9,
        "labels": {
            "movie": {"reached": True, "threshold": 0.31, "validation": {"precision": 0.7, "recall": 0.92}},
            "sports": {
                "reached": False,
                "threshold": None,
                "validation": {"precision": 0.2, "recall": 0.5},
                "why": "the highest validation recall is 0.5000",
            },
        },
    }
    card = model_card.render({**multilabel_run_metrics(), "operating_point": point}, Config(), None, "model")
    assert (
        "Each label is predicted when its probability reaches its threshold, chosen on validation "
        "for recall >= 0.9 (--target-recall 0.9); out of reach there, these keep their F1-chosen "
        'threshold: "sports" (the highest validation recall is 0.5000).'
    ) in card


def test_model_card_warns_when_the_temperature_hit_its_search_bound():
    metrics = run_metrics()
    block = {**metrics["calibration"], "temperature": 0.05, "at_bound": True}
    assert "says little about new data" in model_card.render(metrics, Config(), block, "model")


def test_report_html_inlines_every_figure_and_escapes_texts():
    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "split": "test",
                "rank": 1,
                "loss": 2.0,
                "true_label": "negative",
                "predicted_label": "positive",
                "probability": 0.9,
                "text": "<script>alert(1)</script> & more",
            }
        ],
        columns=CLASSIFICATION.error_columns,
    )
    png = figures.confusion_matrices([[1, 0], [0, 1]], ["a", "b"], "test")
    metrics = run_metrics()
    page = html.render(
        "gs://b/job", metrics, "val_macro_f1", [html.figure_entry("Confusion", png)], metrics["calibration"], frame, 1
    )
    assert page.count("<img ") == 1 and 'src="data:image/png;base64,' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page and "<script>" not in page
    assert "http://" not in page and "https://" not in page


def regression_run_metrics():
    split = {"examples": 30, "loss": 0.21, "pearson": 0.9123, "spearman": 0.8765, "mse": 0.3456, "mae": 0.4321}
    return {
        **run_metrics(with_calibration=False),
        "task": "regression",
        "calibration": None,
        "labels": [],
        "label_kind": "number",
        "label_column": "score",
        "train": split,
        "validation": split,
        "test": split,
    }


def multilabel_run_metrics():
    per_label = {
        "movie": {"precision": 0.9, "recall": 0.8, "f1": 0.85, "support": 12},
        "sports": {"precision": 0.5, "recall": 0.25, "f1": 0.3333, "support": 4},
    }
    split = {
        "examples": 30,
        "loss": 0.3,
        "micro_f1": 0.7712,
        "macro_f1": 0.6543,
        "subset_accuracy": 0.5432,
        "per_label": per_label,
        "thresholds": {"movie": 0.45, "sports": 0.3},
    }
    return {
        **run_metrics(with_calibration=False),
        "task": "multi-label",
        "calibration": None,
        "labels": ["movie", "sports"],
        "label_kind": "names",
        "label_column": "labels",
        "train": split,
        "validation": split,
        "test": split,
    }


def render_page(metrics, frame):
    return html.render("job", metrics, "val_spearman", [], None, frame, 1)


def test_a_regression_report_tables_correlations_and_errors_per_split_without_calibration():
    frame = error_rows.worst_examples(
        {
            "test": SplitPredictions(
                np.array(["so good"], dtype=object), np.array([4.0]), None, None, scores=np.array([2.5])
            )
        },
        [],
        1,
        task=REGRESSION,
    )
    page = render_page(regression_run_metrics(), frame)
    assert "<title>Report: score regressor: minilm-l6-h384-uncased</title>" in page
    for header in ("spearman", "pearson", "MSE", "MAE"):
        assert f"<th>{header}</th>" in page
    assert page.count('<td class="num">0.8765</td>') == 3  # spearman of train, validation, test
    assert "Calibration" not in page and "largest absolute error" in page
    assert "<th>absolute error</th>" in page and '<td class="num">1.5</td>' in page


def test_a_multilabel_report_tables_each_labels_scores_and_threshold():
    page = render_page(multilabel_run_metrics(), pd.DataFrame(columns=MULTI_LABEL.error_columns))
    assert "<th>micro-F1</th>" in page and '<td class="num">0.5432</td>' in page
    assert "Per-label scores: validation" in page and "Per-label scores: test" in page
    assert (
        '<tr><td>sports</td><td class="num">0.30</td><td class="num">0.5000</td>\n'
        '<td class="num">0.2500</td><td class="num">0.3333</td><td class="num">4</td></tr>'
    ) in page
    assert "Calibration" not in page


def test_a_regression_model_card_gives_correlations_and_how_to_get_scores():
    card = model_card.render(regression_run_metrics(), Config(), None, "model")
    for expected in (
        "Predicts a score for a text",
        "`score` column",
        "Spearman 0.8765",
        "MAE 0.4321",
        'out["score"]',
        "`predicted_score`",
        "| test | the sample posts",
    ):
        assert expected in card, expected
    assert "Calibration" not in card and "class" not in card.split("## Training")[0]


def test_a_multilabel_model_card_lists_each_labels_threshold_and_scores():
    metrics = {**multilabel_run_metrics(), "text_pair_column": "sentence2"}
    card = model_card.render(metrics, Config(), None, "model")
    for expected in (
        '2 labels: "movie", "sports"',
        "| sports | 0.30 | 0.5000 | 0.2500 | 0.3333 | 4 |",
        "Micro-F1 0.7712",
        "(trainer/data/sample_data) | 33 | 12 | 4 |",
        "text_pair=tf.constant(",
        "text pair column `sentence2`",
        "`predicted_labels`",
    ):
        assert expected in card, expected
    assert "Calibration" not in card


@pytest.mark.parametrize(
    "policy, export_precision, compute, exported",
    [
        ("mixed_bfloat16", "float32", "bfloat16", "float32"),
        ("float32", "float32", "float32", "float32"),
        ("mixed_float16", "training", "float16", "float16"),
    ],
)
def test_metrics_json_says_which_models_scores_it_holds(policy, export_precision, compute, exported):
    """Issue #49, 6: metrics.json came from the bfloat16 training model, off the float32 export
    by a row now and then, without saying so."""
    from trainer.training.results import evaluated_with

    said = evaluated_with(policy, export_precision)
    assert (said["compute_dtype"], said["export_compute_dtype"]) == (compute, exported)
    assert ("may differ" in said["note"]) == (compute != exported)
