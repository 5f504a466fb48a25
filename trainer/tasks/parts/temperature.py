"""The calibration part (trainer.tasks.parts): a temperature T fitted on validation after
training (trainer.reporting.calibration, metrics.json's `calibration`) by which the export divides
the head's logits, so that its probabilities mean what they say (--calibrate). A kind whose
outputs are not a distribution over classes (a score, labels each with its own sigmoid, tags)
has none: the run fits no temperature and the report draws no reliability diagram."""

import abc


class Calibration(abc.ABC):
    def __init__(self, task):
        self.task = task

    @abc.abstractmethod
    def probabilities(self, outputs, temperature: float = 1.0):
        """The probabilities the export returns at `temperature`, of the model's outputs (T = 1:
        uncalibrated)."""

    @abc.abstractmethod
    def outputs(self, probabilities, temperature: float):
        """The model's outputs that give `probabilities` at `temperature` (up to what does not
        change them): an export's probabilities read back as the run's outputs."""


def softmax(logits, temperature: float = 1.0):
    """softmax(logits / temperature) of each row [N, C] (numpy, float64)."""
    import numpy as np

    scaled = np.asarray(logits, np.float64) / temperature
    scaled -= scaled.max(axis=1, keepdims=True)
    exp = np.exp(scaled)
    return exp / exp.sum(axis=1, keepdims=True)


def softmax_cross_entropy(logits, labels):
    """Each row's cross-entropy [N] of softmax(logits) at its class id (numpy, float64)."""
    import numpy as np

    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    return log_norm - shifted[np.arange(len(labels)), labels]
