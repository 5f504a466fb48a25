"""A split's predictions as the report reads them (Task.split_predictions, export_predictions):
class probabilities, a regression model's scores, or a multi-label model's probabilities and
chosen labels, with the texts they were made of."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class SplitPredictions:
    texts: np.ndarray  # object array of str
    labels: np.ndarray  # int class ids; float scores (regression); 0/1 [N, L] (multi-label)
    probabilities: np.ndarray | None  # [N, C] what the exported model returns (calibrated if
    # it is); multi-label: each label's probability; regression: None
    logits: np.ndarray | None  # classification: [N, C] uncalibrated logits, up to a per-row constant
    scores: np.ndarray | None = None  # regression: [N] the predicted scores
    predicted: np.ndarray | None = None  # what the export decides: classification: [N] class
    # ids (a binary model's threshold applied); multi-label: 0/1 [N, L] the labels above theirs
    pairs: np.ndarray | None = None  # object array of str: each row's second text, or None
    vectors: np.ndarray | None = None  # embeddings: [N, 2, H] each text's unit vector


def label_names_of(outputs: dict) -> list:
    """The label names of a loaded export's outputs (trainer.inference.loaded_model.predict_outputs':
    `label_names` once, as bytes), decoded."""
    return [name.decode("utf-8") for name in outputs["label_names"]]


def probability_columns(label_names, probabilities) -> dict:
    """trainer.predict's probability_<label> column of each label [N], in label order."""
    return {f"probability_{name}": probabilities[:, i] for i, name in enumerate(label_names)}


def probabilities_by_name(label_names, row) -> dict:
    """The server's `probabilities` object of one row: {label: its probability}."""
    return {name: float(p) for name, p in zip(label_names, row)}
