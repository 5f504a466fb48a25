"""MODEL_CARD.md: what the model does, what it was trained on, how well, and its limits.

Written from metrics.json and config.json only (plus the calibration block the report uses), so
it can be rebuilt for any finished run.
"""

import jinja2

from trainer import task_registry
from trainer.config import Config
from trainer.reporting import html

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("trainer.reporting", "templates"),
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)

# Every encoder the registry names has an English, lower-cased WordPiece vocabulary.
_REGISTERED_LANGUAGES = "English (lower-cased vocabulary: case is ignored)"


def _languages(encoder: str) -> str:
    from trainer.modeling.encoders.registry import ENCODER_NAMES

    if encoder in ENCODER_NAMES:
        return _REGISTERED_LANGUAGES
    return "not recorded for this encoder: see its own documentation"


def _data_sources(config: Config) -> dict:
    d = config.data
    if d.training_file is None:
        sample = "the sample posts shipped in the package (trainer/data/sample_data)"
        return {"train": sample, "validation": sample, "test": sample}
    return {
        "train": d.training_file,
        "validation": d.validation_file or f"a stratified {d.validation_fraction:g} of the training data",
        "test": d.testing_file,
    }


def _settings(metrics: dict, config: Config) -> list:
    h, device = metrics["hyperparameters"], metrics.get("device", {})
    return [
        (
            "epochs (completed; best)",
            f"{h['epochs']} ({metrics.get('epochs_completed')}; "
            f"best {metrics.get('best_epoch')}, by {h['selection_metric']})",
        ),
        ("batch size", h["batch_size"]),
        ("peak learning rate (AdamW)", h["learning_rate"]),
        ("warm-up fraction", h["warmup_fraction"]),
        ("weight decay", h["weight_decay"]),
        ("dropout", h["dropout"]),
        ("max sequence length", h["max_seq_length"]),
        (
            "long texts (--long-texts)",
            h.get("long_texts", "truncate")
            if "max_windows" not in h
            else f"windows (overlap {h['window_overlap']}, at most {h['max_windows']}, {h['window_pooling']} pooling)",
        ),
        ("class weights", h["class_weights"]),
        ("encoder frozen", config.model.freeze_encoder),
        ("word embeddings trained", config.model.train_word_embeddings),
        ("seed", h["seed"]),
        (
            "device",
            f"{device.get('platform', '?')}, {device.get('strategy', '?')} strategy, "
            f"{device.get('precision_note', '?')}",
        ),
    ]


def _distillation(metrics: dict) -> dict | None:
    """html.distillation's summary, with the validation metrics in words for the card's sentence
    ("accuracy 0.935 and macro-F1 0.934"): those besides the loss, or the loss when it is the
    only one scored."""
    summary = html.distillation(metrics)
    if not summary or summary["scores"] is None:
        return summary
    shown = [row for row in summary["scores"] if row[0] != "loss"] or summary["scores"]
    return {**summary, "teacher_scored": _in_words(shown, 1), "student_scored": _in_words(shown, 2)}


def _in_words(scores: list, which: int) -> str:
    """ "a 0.935", "a 0.935 and b 0.934", "a 0.935, b 0.934 and c 0.912": the values at
    `which` (1 the teacher's, 2 the student's) of html.distillation's scores."""
    items = [f"{row[0]} {'n/a' if row[which] is None else format(row[which], '.3f')}" for row in scores]
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def _with_sections(task) -> jinja2.Environment:
    """The card's templates with the run's task's sections (Task.model_card) as "task/<section>",
    which the card's template includes: the task object's, as its run trained it."""
    sections = jinja2.DictLoader({f"task/{name}": text for name, text in task.model_card.items()})
    return _TEMPLATES.overlay(loader=jinja2.ChoiceLoader([_TEMPLATES.loader, sections]))


def render(metrics: dict, config: Config, calibration: dict | None, model_dir: str) -> str:
    """The card's Markdown. `calibration` is metrics.json's block (or the report's own fit; None
    for a task without one)."""
    labels, task = metrics["labels"], task_registry.of_run(metrics)
    sources = _data_sources(config)
    eval_split = "test" if "test" in metrics else "validation"
    scores = task.per_label_metrics
    splits = [
        {
            "name": name,
            "source": sources[name],
            "size": size,
            "counts": [metrics[name][scores][label]["support"] for label in labels] if scores else [],
        }
        for name, size in metrics["dataset_sizes"].items()
    ]
    device = metrics.get("device", {})
    template = _with_sections(task).get_template("model_card.md.j2")
    return template.render(
        title=f"{html.title(metrics)} ({config.model.encoder})",
        sections="task/",
        calibrates=task.calibration is not None,
        **{key: task.model_card[key] for key in ("usage", "predict_columns", "counts_note")},
        pair=metrics.get("text_pair_column"),
        labels=labels,
        versions=metrics.get("versions", {}),
        encoder=config.model.encoder,
        encoder_source=device.get("encoder_source", config.model.encoder),
        encoder_backend=device.get("encoder_backend", config.model.encoder_backend),
        encoder_architecture=device.get("encoder_architecture", "not recorded by this run"),
        pooling=metrics["hyperparameters"]["pooling"],
        languages=_languages(config.model.encoder),
        splits=splits,
        text_column=metrics.get("text_column"),
        label_column=metrics.get("label_column"),
        label_kind=metrics.get("label_kind"),
        contained=html.contained_note(metrics),
        rows_skipped=", ".join(f"{name} {count}" for name, count in metrics.get("rows_skipped", {}).items() if count),
        settings=_settings(metrics, config),
        eval_split=eval_split,
        eval_metrics=metrics[eval_split],
        calibration=calibration,
        operating_point=(
            task.operating_point.describe(metrics["operating_point"], labels)
            if metrics.get("operating_point")
            else None
        ),
        max_seq_length=metrics["hyperparameters"]["max_seq_length"],
        long_texts_note=html.long_texts_note(metrics["hyperparameters"]),
        truncated=", ".join(
            f"{count} of {metrics['dataset_sizes'][name]} {name} texts"
            for name, count in metrics.get("truncated_texts", {}).items()
        ),
        train_size=metrics["dataset_sizes"]["train"],
        model_dir=model_dir,
        dry_run=html.is_dry_run(metrics),
        distillation=_distillation(metrics),
    )
