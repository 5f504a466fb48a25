"""Outputs that are not finite, refused: a model trained into NaN weights computes NaN for every
text. Without TensorFlow (numpy only): both runtimes' predictions are checked here
(trainer.inference.loaded_model), and the export checks its validation outputs with it.
"""

import numpy as np

from trainer.errors import UserError


def non_finite_rows(values) -> np.ndarray:
    """Indices of the rows of `values` ([N] or [N, ...]) holding a NaN or an infinity."""
    values = np.asarray(values, np.float64)
    return np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(axis=1))


def check_finite_outputs(outputs, what: str) -> None:
    """Refuses a model whose outputs on `what` are not all finite.

    A model trained into NaN weights computes NaN for every text: exported, it would write
    empty probabilities and fail every request. This is checked on the model's own validation
    rows before anything is calibrated or exported (trainer.training.results.evaluate), and on
    every batch an exported model predicts (trainer.inference.loaded_model).
    """
    bad = non_finite_rows(outputs)
    if len(bad):
        raise UserError(
            f"the model's outputs are NaN or infinite on {len(bad)} of the "
            f"{len(outputs)} {what}: its weights are broken (a diverged training), "
            f"so it is neither exported nor served; retrain it with a lower "
            f"--learning-rate"
        )


def finite_outputs(outputs: dict) -> dict:
    """A batch of an exported model's outputs, refused when any of its numbers (probabilities,
    scores, whatever the task returns) is not finite: trainer.predict would write them as empty
    cells, trainer.serve could not put them in JSON."""
    for values in outputs.values():
        values = np.asarray(values)
        if values.dtype.kind == "f":
            check_finite_outputs(values, "texts of a batch given to --model-dir's model")
    return outputs
