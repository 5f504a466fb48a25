"""Regression's numbers: a score column read as float32 targets, the bins trainer.prepare
stratifies scores on, and the correlations and errors of a split."""

import numpy as np
from scipy import stats

from trainer.data.labels import as_number, is_missing, merge_small_strata
from trainer.errors import UserError
from trainer.reading import where

# Score bins trainer.prepare stratifies on: at most this many, each of at least the rows a
# stratified split needs.
SCORE_BINS = 10


def encode_scores(frame, column: str, task: str = "regression") -> np.ndarray:
    """The column's scores, float32; a missing or non-numeric cell names its row (`task`: the
    --task that reads them)."""
    values = np.empty(len(frame), dtype=np.float32)
    for i, value in enumerate(frame[column].tolist()):
        if is_missing(value):
            raise UserError(f"{where(frame, i, column)}: label is missing")
        number = as_number(value)
        if number is None or not np.isfinite(number):
            raise UserError(
                f"{where(frame, i, column)}: {value!r} is not a number (--task {task} reads the label as a score)"
            )
        values[i] = number
    return values


def score_bins(labels: np.ndarray, minimum: int) -> np.ndarray:
    """Each row's bin of its score (quantiles), small bins pooled."""
    bins = max(1, min(SCORE_BINS, len(labels) // minimum))
    edges = np.unique(np.quantile(labels, np.linspace(0, 1, bins + 1))[1:-1])
    return merge_small_strata(np.searchsorted(edges, labels, side="right"), minimum)


def correlation_metrics(predicted: np.ndarray, labels: np.ndarray) -> dict:
    """pearson, spearman, mse, mae; a correlation of a constant side is 0 (no signal), not NaN."""
    predicted, labels = np.asarray(predicted, np.float64), np.asarray(labels, np.float64)
    errors = predicted - labels
    constant = np.ptp(predicted) == 0 or np.ptp(labels) == 0
    return {
        "pearson": 0.0 if constant else float(stats.pearsonr(predicted, labels)[0]),
        "spearman": 0.0 if constant else float(stats.spearmanr(predicted, labels)[0]),
        "mse": float(np.mean(errors**2)),
        "mae": float(np.mean(np.abs(errors))),
    }
