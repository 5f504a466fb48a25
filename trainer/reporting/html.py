"""report.html: one self-contained page (figures inline as data URIs, no scripts, no network),
so it opens anywhere, including from a gs:// download."""

import base64
from collections.abc import Sequence

import jinja2

from trainer import task_registry
from trainer.reporting import wrong_labels

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("trainer.reporting", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
_HEADERS = {
    "macro_f1": "macro-F1",
    "macro_recall": "macro-recall",
    "micro_f1": "micro-F1",
    "subset_accuracy": "subset accuracy",
    "mse": "MSE",
    "mae": "MAE",
}


def figure_entry(title: str, png: bytes, note: str = "") -> dict:
    return {"title": title, "note": note, "base64": base64.b64encode(png).decode("ascii")}


def title(metrics: dict) -> str:
    """What the model is, in a few words."""
    kind = task_registry.of_run(metrics).title(metrics["labels"])
    return f"{kind}{' of text pairs' if metrics.get('text_pair_column') else ''}"


def long_texts_note(hyperparameters: dict) -> str:
    """What the model does with a text longer than --max-seq-length, in one sentence (the
    report's and the model card's)."""
    h = hyperparameters
    limit, mode = h["max_seq_length"], h.get("long_texts", "truncate")
    head = f"Texts longer than {limit} tokens (--max-seq-length, the special ones included)"
    if mode == "windows":
        return (
            f"{head} are read whole, in windows of {limit} tokens overlapping by "
            f"{h['window_overlap']}, at most {h['max_windows']} per text (a longer text "
            f"loses its end past them), pooled by their {h['window_pooling']} "
            f"(--long-texts windows)."
        )
    kept = (
        f"their first and last tokens, {limit} in all (--long-texts head-tail: a quarter "
        f"from the start, the rest from the end)"
        if mode == "head-tail"
        else f"their first {limit} (--long-texts truncate)"
    )
    return f"{head} are cut to {kept}: the model never sees the rest."


def contained_note(metrics: dict) -> str | None:
    """One sentence on held-out texts found inside training texts (metrics.json's
    contained_texts; training/held_out.py), or None when none were (or an older run's
    metrics.json did not count them)."""
    found = {name: block for name, block in (metrics.get("contained_texts") or {}).items() if block["contained"]}
    if not found:
        return None
    counts = ", ".join(f"{b['contained']:,} of {b['checked']:,} {name} texts" for name, b in found.items())
    return (
        f"{counts} appear inside training texts (as a run of "
        f"{next(iter(found.values()))['min_words']} or more words): the scores on them are "
        f"measured on words the model trained on, so they overstate what it does on new texts."
    )


def is_dry_run(metrics: dict) -> bool:
    """A --dry-run's metrics (one step on a few rows): the report and card say their numbers
    are meaningless. hyperparameters.dry_run is in every run's metrics.json, older ones too."""
    return bool(metrics["hyperparameters"].get("dry_run"))


def distillation(metrics: dict) -> dict | None:
    """metrics.json's `distillation` block as the report and the model card say it, or None for
    a run without a teacher (and a run from before distillation, whose metrics.json has no such
    key). `scores`: (metric, the teacher's value, the student's) for each validation metric
    both were scored by, in the block's order; None when the teacher's file had no validation
    rows, so the teacher was not scored."""
    block = metrics.get("distillation")
    if not block:
        return None
    train, unlabeled = block["transfer_set"]["train"], block["transfer_set"]["unlabeled"]
    scored = block["validation"]
    return {
        "teacher": block["teacher"],
        "kind": block["teacher_kind"],
        "file": block["teacher_file"],
        "transfer_set": (
            f"{train:,} training and {unlabeled:,} unlabeled texts"
            if unlabeled
            else f"{train:,} training texts (no unlabeled ones)"
        ),
        "temperature": f"{block['temperature']:g}",
        "alpha": f"{block['alpha']:g}",
        "scores": None
        if scored is None
        else [
            (_HEADERS.get(key, key), value, scored["student"][key])
            for key, value in scored["teacher"].items()
            if key in scored["student"]
        ],
        "agreement": None if scored is None else scored.get("agreement"),
        "encoder_layers": metrics["hyperparameters"].get("encoder_layers"),
    }


def render(
    job_dir: str,
    metrics: dict,
    metric: str,
    figures: Sequence[dict],
    calibration: dict | None,
    errors,
    errors_per_split: int,
    correct_per_split: int = 0,
    explanations: dict | None = None,
    neighbours: Sequence[dict] = (),
) -> str:
    """`figures` from figure_entry(); `errors` is errors.csv's frame. The metrics table shows
    the task's own summary metrics; a run with per-label thresholds (multi-label) adds its
    per-label scores and thresholds."""
    task = task_registry.of_run(metrics)
    splits = [name for name in ("train", "validation", "test") if name in metrics]
    return _TEMPLATES.get_template("report.html.j2").render(
        title=f"{title(metrics)}: {metrics['hyperparameters']['encoder']}",
        job_dir=job_dir,
        encoder=metrics["hyperparameters"]["encoder"],
        labels=metrics["labels"],
        best_epoch=metrics.get("best_epoch"),
        epochs_completed=metrics.get("epochs_completed"),
        metric=metric,
        columns=[(key, _HEADERS.get(key, key)) for key in ("loss", *task.summary_metrics)],
        summary=[(name, metrics[name]) for name in splits],
        by_length=next(
            (
                (name, metrics[name]["by_length"])
                for name in ("test", "validation")
                if "by_length" in metrics.get(name, {})
            ),
            None,
        ),
        max_seq_length=metrics["hyperparameters"]["max_seq_length"],
        long_texts_note=long_texts_note(metrics["hyperparameters"]),
        per_label=[
            (name, metrics[name][task.per_label_metrics], metrics[name]["thresholds"])
            for name in splits
            if name != "train" and "thresholds" in metrics[name]
        ],
        figures=figures,
        calibration=calibration,
        errors=errors.to_dict(orient="records"),
        error_columns=list(errors.columns),
        errors_per_split=errors_per_split,
        # Correct rows are listed only by a task whose rows are right or wrong (an `outcome`).
        correct_per_split=correct_per_split if "outcome" in errors.columns else 0,
        errors_description=task.errors_description,
        precisions=metrics.get("precisions") or {},
        dry_run=is_dry_run(metrics),
        contained=contained_note(metrics),
        explanations=explanations,  # trainer.reporting.explanations.report_section's
        neighbours=neighbours,  # Task.nearest_neighbours
        label_issues=wrong_labels.section(job_dir, metrics),
        distillation=distillation(metrics),
    )
