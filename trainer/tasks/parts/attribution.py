"""The explanations part (trainer.tasks.parts): integrated gradients attribute one answer of a
whole text to its tokens (trainer.explain, the server's {"explain": true}, report.html's
coloured rows; the export's `explain_tokens`: trainer.explaining.exported). A kind whose answer
is not one of a whole text (a tag per word) has none."""

import abc
from collections.abc import Sequence


class Explanations(abc.ABC):
    """A kind whose export's one output is attributed whatever the text says (a score)."""

    # The export's outputs that pick what is attributed (Choices' kinds); none: the one output.
    outputs: Sequence[str] = ()

    def __init__(self, task):
        self.task = task

    @abc.abstractmethod
    def output(self, module, logits, target):
        """[B] (TensorFlow): what the export's `explain_tokens` attributes of each row of the
        head's float32 `logits` (trainer.explaining.exported, which says why log-odds): the
        log-odds of class (label) `target` [B], or the row's score. `module`
        (trainer.serving.export.ServingModule) holds the temperature."""

    def columns(self, explanation) -> dict:
        """trainer.explain's columns of one Explanation (trainer.explaining.attribute), or of
        None for a row with an empty text (each value None): by default its label, the label's
        probability and the log-odds explained, on the text and on the baseline."""
        e = explanation
        return {
            "explained_label": e and e.target,
            "probability": e and e.probability,
            "log_odds": e and e.output,
            "baseline_log_odds": e and e.baseline_output,
        }


class Choices(Explanations):
    """A kind whose export chooses classes or labels: each chosen one is attributed."""

    @abc.abstractmethod
    def choices(self, outputs) -> tuple:
        """(label names, probabilities [N, C], chosen [N, C] bool: the classes or labels the
        export chose per row) of `outputs`' values: trainer.explain attributes each chosen one,
        or a row's most probable when it chose none."""
