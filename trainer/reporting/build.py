"""Everything the report writes into a finished job dir, local or gs://.

    report.html     one self-contained page: metrics, figures (each task's own kinds, FIGURES),
                    calibration (classification), per-label scores and thresholds (multi-label),
                    worst errors
    report/*.png    each figure on its own
    errors.csv      the worst validation and test examples (--report-errors per split): highest
                    loss, or for regression largest absolute error
    MODEL_CARD.md   the model card

report.html is written last: when it exists, the rest of the report is complete.
"""

import io
import json
import logging

import pandas as pd

from trainer import config as config_lib
from trainer import storage, task_registry
from trainer.errors import UserError
from trainer.reporting import calibration as calibration_lib
from trainer.reporting import error_rows, explanations, figures, html, model_card, precision_recall
from trainer.reporting.predictions import recompute

log = logging.getLogger("trainer")


def load_finished_run(job_dir: str):
    """(config, metrics) of a finished run, or one clear error."""
    config_path, metrics_path = storage.join(job_dir, "config.json"), storage.join(job_dir, "metrics.json")
    if not storage.exists(config_path):
        raise UserError(f"--job-dir: {job_dir} is not a job dir of trainer.task (no config.json)")
    if not storage.exists(metrics_path):  # trainer.report says more: jobdir.why_unfinished
        raise UserError(f"--job-dir: {job_dir} holds no finished run (no metrics.json)")
    try:
        metrics = json.loads(storage.read_text(metrics_path))
    except json.JSONDecodeError as e:
        raise UserError(f"{metrics_path}: not valid JSON ({e})") from None
    return config_lib.load(config_path), metrics


def model_dir_of(config, job_dir: str) -> str:
    """The run's model dir, moved along with its job dir when it was inside it (a copy or a
    download of a job dir still finds its own model)."""
    return moved_along(config, job_dir, config.output.model_dir, "model")


def moved_along(config, job_dir: str, recorded: str, default: str) -> str:
    """A directory of the run (`recorded`, or JOB_DIR/`default`), under `job_dir` if it was
    under the job dir the run recorded."""
    recorded_job = (config.output.job_dir or "").rstrip("/")
    recorded = (recorded or storage.join(recorded_job, default)).rstrip("/")
    if recorded.startswith(recorded_job + "/"):
        return job_dir.rstrip("/") + recorded[len(recorded_job) :]
    return recorded


def read_history(job_dir: str) -> pd.DataFrame:
    path = storage.join(job_dir, "eval_history.csv")
    if not storage.exists(path):
        raise UserError(f"{path}: missing; the learning curves need it")
    return pd.read_csv(io.StringIO(storage.read_text(path)))


def calibration_for_report(metrics: dict, predictions) -> dict:
    """The run's calibration block, or, for a run without one, a temperature the report fits
    itself on the same validation predictions (marked fitted_by_report, not applied)."""
    if metrics.get("calibration"):
        return metrics["calibration"]
    splits = {name: (p.logits, p.labels) for name, p in predictions.items()}
    return {**calibration_lib.calibration_block(splits, applied=False), "fitted_by_report": True}


def _confusion_matrices(metrics: dict, predictions, calibration) -> list:
    return [
        (
            f"confusion_{name}.png",
            f"Confusion matrix: {name}",
            figures.confusion_matrices(metrics[name]["confusion_matrix"], metrics["labels"], name),
            "Rows are true labels, columns predicted labels.",
        )
        for name in _evaluated(metrics)
    ]


def _per_class_scores(metrics: dict, predictions, calibration) -> list:
    per_class = {name: metrics[name]["per_class"] for name in _evaluated(metrics)}
    return [
        (
            "per_class.png",
            "Per-class precision, recall and F1",
            figures.per_class_scores(per_class, metrics["labels"]),
            "",
        )
    ]


def _reliability(metrics: dict, predictions, calibration: dict) -> list:
    shown = "test" if "test" in predictions else "validation"
    p, temperature = predictions[shown], calibration["temperature"]
    return [
        (
            "reliability.png",
            f"Reliability: {shown}",
            figures.reliability_diagram(
                calibration_lib.softmax(p.logits),
                calibration_lib.softmax(p.logits, temperature),
                p.labels,
                shown,
                temperature,
            ),
            "Bars below the diagonal: the model is more confident than it is accurate.",
        )
    ]


def _predicted_vs_true(metrics: dict, predictions, calibration) -> list:
    by_split = {name: (p.labels, p.scores) for name, p in predictions.items()}
    return [
        (
            "predicted_vs_true.png",
            "Predicted against true scores",
            figures.predicted_vs_true(by_split),
            "One dot per example (the exported model's score); on the dashed line y = x a prediction is exact.",
        )
    ]


def _residuals(metrics: dict, predictions, calibration) -> list:
    by_split = {name: (p.labels, p.scores) for name, p in predictions.items()}
    return [
        (
            "residuals.png",
            "Residuals",
            figures.residual_histograms(by_split),
            "Predicted minus true score: left of 0 the model scores too low, right of it too high.",
        )
    ]


def _per_label_scores(metrics: dict, predictions, calibration) -> list:
    per_label = {name: metrics[name]["per_label"] for name in _evaluated(metrics)}
    return [
        (
            "per_label.png",
            "Per-label precision, recall and F1",
            figures.per_class_scores(per_label, metrics["labels"], what="label"),
            "Each label is chosen when its probability reaches its own threshold, picked on "
            "validation (the tables above).",
        )
    ]


# The figure kinds a task's `figures` may name: each (metrics, predictions, calibration) ->
# [(file name, title, png bytes, note)].
def _entity_confusion(metrics: dict, predictions, calibration) -> list:
    return [
        (
            f"entity_confusion_{name}.png",
            f"Entity types confused: {name}",
            figures.confusion_matrices(metrics[name]["confusion"]["matrix"], metrics[name]["confusion"]["types"], name),
            "Entities matched by their words: rows are true types, columns predicted ones; "
            "(none) is an entity missed (column) or found where there is none (row).",
        )
        for name in _evaluated(metrics)
    ]


def _entity_types(metrics: dict, predictions, calibration) -> list:
    per_type = {name: metrics[name]["per_type"] for name in _evaluated(metrics)}
    types = sorted({kind for scores in per_type.values() for kind in scores})
    per_type = {
        name: {kind: scores.get(kind, {"precision": 0.0, "recall": 0.0, "f1": 0.0}) for kind in types}
        for name, scores in per_type.items()
    }
    return [
        (
            "entity_types.png",
            "Per-type precision, recall and F1",
            figures.per_class_scores(per_type, types, "entity type"),
            "",
        )
    ]


def _similarity(metrics: dict, predictions, calibration) -> list:
    by_split = {name: (p.labels, p.scores) for name, p in predictions.items()}
    return [
        (
            "similarity.png",
            "Cosine of similar and dissimilar pairs",
            figures.cosine_histograms(by_split),
            "Each pair's cosine, the pairs cut at the split's median score: the less the two "
            "histograms overlap, the better the vectors tell similar texts from dissimilar ones.",
        )
    ]


FIGURES = {
    "confusion_matrices": _confusion_matrices,
    "per_class_scores": _per_class_scores,
    "reliability": _reliability,
    "predicted_vs_true": _predicted_vs_true,
    "residuals": _residuals,
    "per_label_scores": _per_label_scores,
    "entity_confusion": _entity_confusion,
    "entity_types": _entity_types,
    "similarity": _similarity,
}


def _evaluated(metrics: dict) -> list:
    return [name for name in ("validation", "test") if name in metrics]


def render_figures(metrics: dict, config, history: pd.DataFrame, predictions, calibration: dict | None) -> list:
    """[(file name, title, png bytes, note)] in report order: the learning curves, then the
    task's own figures."""
    task, metric = task_registry.of_run(metrics), config.train.selection_metric
    out = [
        (
            "learning_curves.png",
            "Learning curves",
            figures.learning_curves(
                history, metrics.get("best_epoch"), metric, task.loss_name, by_step=bool(config.train.eval_every_steps)
            ),
            f"The dashed line marks the best epoch by {metric}: its weights are the exported ones.",
        )
    ]
    own = [figure for kind in task.figures for figure in FIGURES[kind](metrics, predictions, calibration)]
    own += [
        (h["file"], h["title"], figures.histograms(h["groups"], h["panel"], h["counted"]), h["note"])
        for h in task.cosine_histograms(predictions)
    ]
    return out + own + precision_recall.figures(metrics, predictions, task)


def build_report(
    job_dir: str,
    metrics: dict | None = None,
    errors_per_split: int | None = None,
    correct_per_split: int | None = None,
    predictions: dict | None = None,
) -> list:
    """Writes the report into `job_dir`; returns the paths written.

    `metrics` is metrics.json's content and `predictions` the validation and test predictions
    (Task.split_predictions): the training run passes both, before writing metrics.json (which
    marks the run finished); `trainer.report` reads the metrics from a finished run and recomputes
    the predictions with its exported model.
    """
    if metrics is None:
        config, metrics = load_finished_run(job_dir)
    else:
        config = config_lib.load(storage.join(job_dir, "config.json"))
    task = task_registry.of_run(metrics)
    per_split = config.output.report_errors if errors_per_split is None else errors_per_split
    if per_split < 0:
        raise UserError(f"--report-errors: must be >= 0, got {per_split}")
    correct = config.output.report_correct if correct_per_split is None else correct_per_split
    if correct < 0:
        raise UserError(f"--report-correct: must be >= 0, got {correct}")
    model_dir = model_dir_of(config, job_dir)
    if predictions is None:
        if not storage.exists(storage.join(model_dir, "saved_model.pb")):
            raise UserError(f"{model_dir}: no exported model (saved_model.pb) to recompute predictions with")
        predictions = recompute(config, model_dir, metrics["labels"], task)
    history = read_history(job_dir)
    # A temperature rescales class probabilities: a task without them has no calibration.
    calibration = calibration_for_report(metrics, predictions) if task.calibration is not None else None
    errors = error_rows.worst_examples(predictions, metrics["labels"], per_split, task, correct)
    attributions = explanations.report_section(
        model_dir,
        predictions,
        metrics["labels"],
        task,
        config.output.ig_steps,
        config.train.seed,
        config.output.report_explanations,
        metrics.get("durations", {}).get("train"),
        config.runtime.log_every_seconds,
    )
    written, entries = [], []
    for name, title, png, note in render_figures(metrics, config, history, predictions, calibration):
        storage.write_bytes_atomic(storage.join(job_dir, f"report/{name}"), png)
        written.append(storage.join(job_dir, f"report/{name}"))
        entries.append(html.figure_entry(title, png, note))
    outputs = {  # in writing order: report.html last
        "errors.csv": error_rows.to_csv(errors),
        "MODEL_CARD.md": model_card.render(metrics, config, calibration, model_dir),
        "report.html": html.render(
            job_dir,
            metrics,
            config.train.selection_metric,
            entries,
            calibration,
            errors,
            per_split,
            correct,
            attributions,
            task.nearest_neighbours(predictions),
        ),
    }
    for name, text in outputs.items():
        storage.write_text_atomic(storage.join(job_dir, name), text)
        written.append(storage.join(job_dir, name))
    log.info("report: wrote %s and %d figures to %s", ", ".join(outputs), len(entries), job_dir)
    return written
