"""A run's validation and test predictions as the report reads them: class probabilities, a
regression model's scores, or a multi-label model's probabilities and chosen labels.

The training run hands over the outputs it computed its metrics from (`from_outputs`): the end of
a run predicts each split once. `trainer.report` on a finished run recomputes them with the
exported model (`recompute`).

The data comes back from config.json alone: `load_datasets` re-reads and re-splits it exactly
as training did (seeded). A classifier's export returns probabilities softmax(z / T) with its own
temperature T (1 unless the run calibrated it). The report needs the uncalibrated ones too, and
recovers them as softmax(T * log p): T * log p = z - T * logsumexp(z / T) differs from the
logits z by a per-row constant, which softmax ignores. That keeps the serving signature (and
every client of it) unchanged, and works for models exported before calibration existed.
"""
import dataclasses
import logging
from typing import Dict, Optional

import numpy as np

from trainer.errors import UserError

log = logging.getLogger("trainer")

# log of the smallest normal float32: a probability that underflowed to 0 gets a finite logit.
_LOG_TINY = float(np.log(np.finfo(np.float32).tiny))


@dataclasses.dataclass
class SplitPredictions:
    texts: np.ndarray  # object array of str
    labels: np.ndarray  # int class ids; float scores (regression); 0/1 [N, L] (multi-label)
    probabilities: Optional[np.ndarray]  # [N, C] what the exported model returns (calibrated if
    # it is); multi-label: each label's probability; regression: None
    logits: Optional[np.ndarray]  # classification: [N, C] uncalibrated logits, up to a per-row constant
    scores: Optional[np.ndarray] = None  # regression: [N] the predicted scores
    predicted: Optional[np.ndarray] = None  # what the export decides: classification: [N] class
    # ids (a binary model's threshold applied); multi-label: 0/1 [N, L] the labels above theirs
    pairs: Optional[np.ndarray] = None  # object array of str: each row's second text, or None


def logits_from_probabilities(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    return temperature * np.maximum(np.log(np.asarray(probabilities, np.float64)), _LOG_TINY)


def load_model(model_dir: str):
    """(loaded SavedModel, its temperature); keep the first alive while calling its signature."""
    import tensorflow as tf

    import tensorflow_text  # noqa: F401  registers the tokenizer ops the graph uses

    loaded = tf.saved_model.load(model_dir)
    temperature = float(loaded.temperature.numpy()) if hasattr(loaded, "temperature") else 1.0
    return loaded, temperature


def _check_names(names, label_names, model_dir: str) -> None:
    if list(names) != list(label_names):
        raise UserError(f"{model_dir}: the model's labels {list(names)} are not the run's "
                        f"{list(label_names)}")


def from_outputs(task: str, outputs: np.ndarray, labels: np.ndarray, texts, pairs,
                 temperature: float = 1.0, thresholds=None, decide=None) -> SplitPredictions:
    """One split's predictions from the model's outputs (logits; a regression model's scores),
    as its export returns them: softmax(z / T) with the temperature the export applies, a
    multi-label model's labels at or above their `thresholds`, a classifier's classes as
    `decide` (logits -> class ids; default the most probable) chooses them."""
    from trainer.reporting.calibration import softmax
    from trainer.tasks.multilabel import sigmoid

    if task == "regression":
        return SplitPredictions(texts, labels.astype(np.float64), None, None,
                                scores=outputs.reshape(-1).astype(np.float64), pairs=pairs)
    if task == "multi-label":
        probabilities = sigmoid(outputs)
        return SplitPredictions(texts, labels.astype(np.int64), probabilities, None,
                                predicted=(probabilities >= np.asarray(thresholds)).astype(np.int32),
                                pairs=pairs)
    predicted = outputs.argmax(axis=1) if decide is None else decide(outputs)
    return SplitPredictions(texts, labels.astype(np.int64), softmax(outputs, temperature),
                            outputs.astype(np.float64), predicted=np.asarray(predicted, np.int64),
                            pairs=pairs)


def _predict(task: str, serve, split, texts, pairs, batch_size: int, temperature: float, label_names,
             model_dir: str) -> SplitPredictions:
    """One split's predictions, as the task's export returns them."""
    from trainer.serving import predict

    if task == "regression":
        return SplitPredictions(texts, split.labels.astype(np.float64), None, None,
                                scores=predict.predict_scores(serve, texts, batch_size, pairs),
                                pairs=pairs)
    if task == "multi-label":
        probabilities, names, _, chosen = predict.predict_label_sets(serve, texts, batch_size, pairs)
        _check_names(names, label_names, model_dir)
        return SplitPredictions(texts, split.labels.astype(np.int64), probabilities, None,
                                predicted=chosen, pairs=pairs)
    probabilities, names, chosen = predict.predict_classes(serve, texts, batch_size, pairs)
    _check_names(names, label_names, model_dir)
    return SplitPredictions(texts, split.labels.astype(np.int64), probabilities,
                            logits_from_probabilities(probabilities, temperature),
                            predicted=chosen, pairs=pairs)


def recompute(config, model_dir: str, label_names,
              task: str = "classification") -> Dict[str, SplitPredictions]:
    """{"validation": ..., "test": ...} (test when the run had one) from the exported model."""
    from trainer.data.splits import load_datasets

    datasets = load_datasets(config)
    if list(datasets.labels.names) != list(label_names):
        raise UserError(f"the run's data now yields labels {list(datasets.labels.names)}, but the "
                        f"run trained on {list(label_names)}: its data files changed since")
    loaded, temperature = load_model(model_dir)
    serve = loaded  # the whole module, not its signature: token-sorted ladder batches
    evaluated = {name: split for name, split in datasets.splits().items() if name != "train"}
    out = {}
    for name, (texts, pairs) in datasets.read_texts(*evaluated).items():
        split = evaluated[name]
        log.info("report: predicting %d %s texts with the exported model", len(split), name)
        out[name] = _predict(task, serve, split, texts, pairs, config.train.eval_batch_size,
                             temperature, label_names, model_dir)
    return out
