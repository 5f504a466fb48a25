"""The text columns a model was trained on, so predicting and serving it need no column flags.

trainer.task exports the model to JOB_DIR/model, and the run's JOB_DIR/metrics.json records the
columns training read (`text_column`, `text_pair_column`), named by flags or detected. A model
dir copied on its own (Vertex's AIP_STORAGE_URI copy of it) has no job dir around it: its
columns are unknown, and trainer.predict detects them as the trainer does.
"""

import json
import os
import posixpath

from trainer import storage
from trainer.errors import UserError

UNKNOWN = (None, None)


def run_dir(model_dir: str) -> str | None:
    """The job dir of the finished run whose export `model_dir` is (JOB_DIR/model, beside
    JOB_DIR/metrics.json), or None for a model dir on its own."""
    model_dir = str(model_dir).rstrip("/")
    if "://" not in model_dir:
        model_dir = os.path.abspath(model_dir)
    if posixpath.basename(model_dir) != "model":
        return None
    job_dir = posixpath.dirname(model_dir)
    return job_dir if storage.exists(storage.join(job_dir, "metrics.json")) else None


def model_columns(model_dir: str) -> tuple:
    """(text column, pair column or None) the model was trained on, or UNKNOWN."""
    job_dir = run_dir(model_dir)
    if job_dir is None:
        return UNKNOWN
    metrics_path = storage.join(job_dir, "metrics.json")
    try:
        metrics = json.loads(storage.read_text(metrics_path))
    except json.JSONDecodeError as e:
        raise UserError(f"{metrics_path}: not valid JSON ({e}); the model's text columns are read from it") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("text_column"), str):
        return UNKNOWN
    pair = metrics.get("text_pair_column")
    return metrics["text_column"], pair if isinstance(pair, str) else None
