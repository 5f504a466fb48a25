"""Regression's parts (trainer.tasks.parts): the score itself explained, and a teacher's scores as
targets (distill.py). A score has no yes/no decision to threshold, no class probabilities to
calibrate or for cleanlab to judge: no operating point, calibration or label issues."""

from trainer.tasks.parts import attribution, teacher_targets


class ScoreExplained(attribution.Explanations):
    """The export's one score is attributed, whatever the text says."""

    def output(self, module, logits, target):
        """The score itself, whatever `target`."""
        import tensorflow as tf

        return self.task.serving_outputs(module, logits, tf.shape(logits)[0])["score"]

    def columns(self, explanation) -> dict:
        """The score explained, on the text and on the baseline."""
        e = explanation
        return {"predicted_score": e and e.output, "baseline_score": e and e.baseline_output}


class ScoreDistillation(teacher_targets.Distillation):
    """A teacher's score per text, in the training labels' units."""

    def columns(self, label_names) -> list:
        """The teacher's one score (trainer.predict's column)."""
        return ["predicted_score"]

    def loss(self, temperature: float, alpha: float):
        """Squared errors in training-label standard deviations (the task's prepared std), as
        the plain loss; `temperature` has nothing to soften in a score."""
        from trainer.tasks.regression import distill

        return distill.DistillationMSE(self.task.std, alpha)

    def metrics(self) -> list:
        from trainer.tasks.regression import distill

        return [distill.LabelledMAE(name="mae")]

    def outputs(self, teacher):
        import numpy as np

        return np.asarray(teacher, np.float64).reshape(-1)

    def agreement(self, teacher, outputs):
        """None: two scores are never alike or not (their correlations are in summarize's)."""
        return None
