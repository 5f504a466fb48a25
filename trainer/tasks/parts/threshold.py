"""The operating point part (trainer.tasks.parts): the yes/no decisions of a kind's export that a
threshold can move (a binary class, each label of a multi-label model). --target-precision/
--target-recall choose them on validation (trainer.training.operating_point) and the report
draws their precision-recall curves. Also the words a chosen threshold is described in, so the
model card and report.html of every kind that has one say it alike."""

import abc


class OperatingPoint(abc.ABC):
    def __init__(self, task):
        self.task = task  # the kind whose decisions are thresholded (and hold the chosen ones)

    def check(self, label_names, flag: str) -> None:
        """Refuses --target-precision/--target-recall (`flag`) with one error when this model's
        labels leave no yes/no decision (parts.refusal with its reason): accepted by default."""

    @abc.abstractmethod
    def decision_scores(self, outputs, labels, temperature: float) -> tuple:
        """(scores [N, K], truth [N, K]) of a split: per yes/no decision the export makes, the
        probability it thresholds (at `temperature`) and whether the row's label says yes."""

    @abc.abstractmethod
    def choose(self, point, target: str, value: float, label_names, temperature: float) -> dict:
        """metrics.json's operating_point block; `point(column, what)` chooses the threshold of
        decision `column` of decision_scores (`what` names it in the log) and returns its
        {"reached", "threshold", "validation", ...}. The reached thresholds become the task's
        decisions (the export's and the final metrics')."""

    @abc.abstractmethod
    def kept_decision(self, column: int) -> str:
        """What decision `column` keeps when its target is out of reach, for the warning."""

    @abc.abstractmethod
    def describe(self, point: dict, label_names) -> str:
        """What the export decides at metrics.json's operating_point block, in words naming the
        threshold(s), for the model card and report.html."""

    @abc.abstractmethod
    def curves(self, point: dict, predictions, label_names) -> list:
        """[(name, scores, truth, chosen point)] per decision of the validation `predictions`
        (a trainer.inference.split_predictions.SplitPredictions), for report.html's precision-recall
        curves."""


def wanted(point: dict) -> str:
    """The target as the user asked for it, flag included."""
    return f"{point['target']} >= {point['value']:g} (--target-{point['target']} {point['value']:g})"


def rate(value) -> str:
    """A precision or recall of metrics.json (None where it had no rows) for a sentence."""
    return "-" if value is None else f"{value:.3f}"
