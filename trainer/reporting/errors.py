"""errors.csv: the validation and test examples the model gets most wrong, highest loss first.

The loss is the exported model's own: -log of the probability it gives the true label (after
its temperature, if calibrated), so the list shows what users of the model will see.
"""
from typing import Mapping

import numpy as np
import pandas as pd

from trainer.reporting.predictions import SplitPredictions

COLUMNS = ["split", "rank", "loss", "true_label", "predicted_label", "probability", "text"]


def worst_examples(predictions: Mapping[str, SplitPredictions], label_names, per_split: int) -> pd.DataFrame:
    """The `per_split` highest-loss rows of each split, with COLUMNS."""
    names = np.asarray(label_names, dtype=object)
    frames = []
    for split, p in predictions.items():
        true_probability = p.probabilities[np.arange(len(p.labels)), p.labels].astype(np.float64)
        loss = -np.log(np.maximum(true_probability, np.finfo(np.float64).tiny))
        # Stable sort on -loss: ties keep the data's order.
        worst = np.argsort(-loss, kind="stable")[:per_split]
        predicted = p.probabilities[worst].argmax(axis=1)
        frames.append(pd.DataFrame({
            "split": split, "rank": np.arange(1, len(worst) + 1), "loss": loss[worst],
            "true_label": names[p.labels[worst]], "predicted_label": names[predicted],
            "probability": p.probabilities[worst, predicted].astype(np.float64),
            "text": p.texts[worst]}, columns=COLUMNS))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.6g")
