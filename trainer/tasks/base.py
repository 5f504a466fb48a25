"""The interface every task implements; the stages of a run only talk to this."""
import abc
from typing import Sequence

import numpy as np


class Task(abc.ABC):
    name: str
    train_metric: str  # the Keras metric logged while training ("accuracy", "mae")
    summary_metrics: Sequence[str]  # keys of summarize() tracked per epoch as val_<key>, besides loss
    loss_name: str  # what the loss measures, in words (the report's axis label)

    def history_columns(self) -> tuple:
        """eval_history.csv's columns, in order."""
        return ("epoch", "step", "loss", self.train_metric, "val_loss",
                *(f"val_{key}" for key in self.summary_metrics), "learning_rate", "seconds")

    def epoch_metrics(self) -> tuple:
        """The keys of summarize() that become val_* columns each epoch."""
        return ("loss", *self.summary_metrics)

    def prepare(self, train_labels: np.ndarray) -> None:
        """Learns what the head needs from the training labels (e.g. their scale)."""

    def fit_on_validation(self, outputs: np.ndarray, labels: np.ndarray) -> None:
        """After training: fits what the task decides on validation (multi-label thresholds)."""

    def validation_caveat(self, has_test: bool):
        """Why the validation figures flatter the model, when fit_on_validation decided
        something on that very split (metrics.json's validation `caveat`); None otherwise."""
        return None

    @abc.abstractmethod
    def output_units(self, labels) -> int:
        """Width of the head's output layer."""

    def output_layer(self, outputs):
        """Maps the head's float32 outputs to what the model returns (identity by default)."""
        return outputs

    @abc.abstractmethod
    def loss(self):
        """The Keras loss the model trains with."""

    @abc.abstractmethod
    def keras_metrics(self) -> list:
        """The Keras metrics logged while training."""

    @abc.abstractmethod
    def summarize(self, outputs: np.ndarray, labels: np.ndarray, label_names) -> dict:
        """metrics.json's block of one split, from the model's outputs over the whole split."""

    @abc.abstractmethod
    def describe(self, result: dict) -> str:
        """One log line's worth of a split's metrics."""

    @abc.abstractmethod
    def describe_epoch(self, logs: dict) -> str:
        """An epoch's training and validation metrics, for its progress line."""
