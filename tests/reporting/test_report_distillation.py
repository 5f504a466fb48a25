"""A distilled run's report.html and MODEL_CARD.md say what distillation did (issue #51, 5):
the teacher, the transfer set, temperature and alpha, and the teacher's and the student's
validation metrics with their agreement, from metrics.json's `distillation` block; a run
without a teacher (and an old run, whose metrics.json has no such block) says nothing of it."""

import json
import pathlib

import pytest
from conftest import FIXTURES
from test_dry_run import render_page
from test_reporting import run_metrics

from trainer import config as config_lib
from trainer.config import Config
from trainer.reporting import model_card

OLD_RUN = pathlib.Path(FIXTURES) / "export-2026-11-28"


def distilled_metrics(validation="scored", encoder_layers=None):
    """run_metrics of a student distilled from a model teacher; `validation` None: the
    teacher's file had no validation rows."""
    metrics = run_metrics()
    metrics["hyperparameters"]["encoder_layers"] = encoder_layers
    metrics["distillation"] = {
        "teacher": "gs://bucket/mpnet-run/model",
        "teacher_kind": "model",
        "teacher_file": "runs/x/teacher/0123abcd.csv",
        "transfer_set": {"train": 10000, "unlabeled": 50614},
        "temperature": 2.0,
        "alpha": 0.5,
        "teacher_seconds": 812.4,
        "validation": validation
        and {
            "teacher": {"loss": 0.21, "accuracy": 0.935, "macro_f1": 0.934},
            "student": {"loss": 0.25, "accuracy": 0.921, "macro_f1": 0.920},
            "agreement": 0.953,
        },
    }
    return metrics


def card_of(metrics, config=None):
    return model_card.render(metrics, config or Config(), metrics["calibration"], "model")


def test_the_report_names_the_teacher_and_tables_both_models_validation_metrics_and_agreement():
    page = render_page(distilled_metrics())
    section = page.split("<h2>Distillation</h2>")[1].split("<h2>")[0]
    for expected in (
        "<code>gs://bucket/mpnet-run/model</code> (a model: its outputs were written "
        "to <code>runs/x/teacher/0123abcd.csv</code>)",
        "10,000 training and 50,614 unlabeled texts",
        "temperature 2 and alpha 0.5",
        '<tr><td>accuracy</td><td class="num">0.9350</td><td class="num">0.9210</td></tr>',
        '<tr><td>macro-F1</td><td class="num">0.9340</td><td class="num">0.9200</td></tr>',
        '<tr><td>loss</td><td class="num">0.2100</td><td class="num">0.2500</td></tr>',
        "95.3% of rows decided alike",
    ):
        assert expected in section, expected


def test_the_model_card_names_the_teacher_both_models_scores_and_their_agreement():
    card = card_of(distilled_metrics())
    assert (
        "Distilled from the teacher `gs://bucket/mpnet-run/model` (a model; 10,000 training "
        "and 50,614 unlabeled texts, temperature 2, alpha 0.5): on validation the teacher "
        "scored accuracy 0.935 and macro-F1 0.934, this model accuracy 0.921 and macro-F1 "
        "0.920, agreeing on 95.3% of rows."
    ) in card
    assert "--encoder-layers" not in card


def test_the_model_card_names_the_encoder_layers_a_student_kept():
    card = card_of(distilled_metrics(encoder_layers=6))
    assert "This model keeps 6 of its encoder's layers (`--encoder-layers 6`)." in card


def test_an_agreement_not_measured_is_left_out_of_the_card_and_dashed_in_the_report():
    metrics = distilled_metrics()
    metrics["distillation"]["validation"]["agreement"] = None
    assert "this model accuracy 0.921 and macro-F1 0.920.\n" in card_of(metrics)
    assert '<tr><td>agreement</td><td class="num" colspan="2">-</td></tr>' in render_page(metrics)


def test_a_teacher_scored_by_its_loss_alone_is_compared_by_its_loss_in_the_card():
    metrics = distilled_metrics()
    metrics["distillation"]["validation"].update(teacher={"loss": 0.21}, student={"loss": 0.25})
    assert "the teacher scored loss 0.210, this model loss 0.250, agreeing" in card_of(metrics)


def test_a_teacher_file_without_validation_rows_is_said_to_leave_the_teacher_unscored():
    metrics = distilled_metrics(validation=None)
    metrics["distillation"].update(teacher="teacher.csv", teacher_kind="file", teacher_file="teacher.csv")
    page, card = render_page(metrics), card_of(metrics)
    unscored = "The teacher's file has no validation rows, so the teacher is not scored."
    assert unscored in page and "(a file of its outputs)" in page and "<th>teacher</th>" not in page
    assert (
        "Distilled from the teacher `teacher.csv` (a file of its outputs; 10,000 training and "
        f"50,614 unlabeled texts, temperature 2, alpha 0.5). {unscored}"
    ) in card


@pytest.mark.parametrize("run", ["no teacher", "old run"])
def test_a_run_without_a_teacher_says_nothing_of_distillation(run):
    """metrics.json's block is null without a teacher; an old run's (tests/fixtures/
    export-2026-11-28, from before distillation) has no such key, and still renders."""
    if run == "old run":
        metrics = json.loads((OLD_RUN / "metrics.json").read_text())
        config = config_lib.load(str(OLD_RUN / "config.json"))
        assert "distillation" not in metrics
    else:
        metrics, config = {**distilled_metrics(), "distillation": None}, Config()
    page, card = render_page(metrics), card_of(metrics, config)
    for text in (page, card):
        assert "distill" not in text.lower() and "teacher" not in text.lower()
