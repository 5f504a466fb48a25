"""Token classification's one part (trainer.tasks.parts): a teacher's tag probabilities per word
as targets (distill.py; its file: tasks/tagging/teacher_file.py). A tagger decides a tag per word: no
yes/no decision to threshold, no distribution over a row's classes to calibrate or for cleanlab
to judge, and no answer of a whole text to attribute to its words."""

from trainer.tasks.parts import teacher_targets


class TagDistillation(teacher_targets.Distillation):
    """Per word, then per token once aligned to the tokens as the tags are."""

    def columns(self, label_names) -> list:
        """The tags each word's probabilities name in a teacher file: the run's tags."""
        return list(label_names)

    def problem(self, values):
        """(sentence, why) of the first sentence one of whose words' probabilities (a row of
        `values` [N, W, C], NaN past its words, all 0 where the teacher gave none) is outside
        [0, 1] or does not sum to 1 (within 0.01)."""
        from trainer.tasks.tagging import numbers

        return numbers.teacher_problem(values)

    def is_packed(self, labels) -> bool:
        return labels.ndim == 3

    def loss(self, temperature: float, alpha: float):
        from trainer.tasks.tagging import distill

        return distill.TagDistillationLoss(temperature, alpha)

    def metrics(self) -> list:
        from trainer.tasks.tagging import distill

        return [distill.LabelledTagAccuracy(name="tag_accuracy")]

    def outputs(self, teacher):
        """Log probabilities per token [N, S, tags] (the teacher's, aligned to tokens as the
        labels are), so summarize reads each word's tag at its first piece as the student's."""
        from trainer.tasks.classification import metrics

        return metrics.logits_from_probabilities(teacher, 1.0)

    def agreement(self, teacher, outputs):
        """The share of words the teacher gave probabilities whose tag both choose alike."""
        from trainer.tasks.tagging import numbers

        return numbers.teacher_agreement(teacher, outputs)
