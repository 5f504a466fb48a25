"""The label issues part (trainer.tasks.parts): cleanlab judges a kind's training labels by its
out-of-sample probabilities of classes or labels (trainer.training.label_issues, cross_fit),
ranks the doubtful ones in label_issues.csv, and --find-label-issues adds the training rows. A kind
without one probability per class or label of a row has none."""

import abc


class LabelIssues(abc.ABC):
    def __init__(self, task):
        self.task = task

    @abc.abstractmethod
    def probabilities(self, outputs):
        """The uncalibrated probabilities cleanlab judges labels by, of the model's outputs."""

    @abc.abstractmethod
    def rank(self, probabilities, labels, ranking_probabilities) -> tuple:
        """(cleanlab's flagged rows, every row's label quality score) of out-of-sample
        `probabilities`, the scores from `ranking_probabilities`."""

    @abc.abstractmethod
    def members(self, labels, count: int):
        """[rows, count] bool: which classes (labels) each row carries."""

    @abc.abstractmethod
    def chance_accuracies(self, probabilities, labels) -> tuple:
        """(the model's accuracy, the best constant answer's) on these rows."""

    @abc.abstractmethod
    def label_texts(self, labels, spec) -> list:
        """Each row's given label as label_issues.csv writes it."""

    @abc.abstractmethod
    def suggested_labels(self, probabilities, spec) -> list:
        """Each row's label as the model would give it, for label_issues.csv."""
