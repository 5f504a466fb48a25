"""A --dry-run's job dir says so everywhere a person looks (issue #37, 10): metrics.json, the
model card and report.html; trainer.task's real command replaces it (tests/training/test_jobdir.py)."""

import pandas as pd
from test_reporting import run_metrics

from trainer import task_registry
from trainer.config import Config
from trainer.reporting import html, model_card


def dry_run_metrics():
    metrics = run_metrics()
    metrics["hyperparameters"]["dry_run"] = True
    return metrics


def test_a_dry_runs_model_card_says_its_numbers_are_meaningless_and_only_a_dry_runs_does():
    metrics, real = dry_run_metrics(), run_metrics()
    card = model_card.render(metrics, Config(), metrics["calibration"], "model")
    assert card.splitlines()[0].endswith("(dry run)")
    assert "**A dry run, not a trained model.**" in card
    assert "dry run" not in model_card.render(real, Config(), real["calibration"], "model").lower()


def render_page(metrics):
    errors = pd.DataFrame(columns=task_registry.by_name("classification").error_columns)
    return html.render("job", metrics, "val_macro_f1", [], None, errors, 1)


def test_a_dry_runs_report_says_its_numbers_are_meaningless_and_only_a_dry_runs_does():
    page = render_page(dry_run_metrics())
    assert "(dry run)</h1>" in page and "A dry run, not a trained model." in page
    assert "dry run" not in render_page(run_metrics()).lower()
