"""One number per text: a linear float32 output, MSE on standardized targets, correlations.

The network learns z = (y - mean) / std of the training labels, whatever their scale (a 0-5
similarity, a 1-10 rating); the model's last layer maps z back, so predictions, the export and
metrics are all in the label's own units while the loss sees unit-variance targets (in the
spirit of TF Model Garden's sentence-prediction regression, which trains on the raw score).
"""

from trainer.errors import UserError
from trainer.reading import LABEL_COLUMNS
from trainer.tasks.base import TextTask
from trainer.tasks.regression import card, parts
from trainer.tasks.score_labels import ScoreLabels


class RegressionTask(ScoreLabels, TextTask):
    name = "regression"
    metric_goals = {
        "val_spearman": "maximize",
        "val_pearson": "maximize",
        "val_mse": "minimize",
        "val_mae": "minimize",
        "val_loss": "minimize",
    }
    train_metric = "mae"
    summary_metrics = ("spearman", "pearson", "mse", "mae")
    loss_name = "MSE of standardized scores"
    label_column_names = LABEL_COLUMNS + ("score",)
    exported_outputs = "scores"
    decision_output = "score"
    export_mark = "score"
    answer_outputs = ("score",)
    agreement_metric = "spearman"
    figures = ("predicted_vs_true", "residuals")
    error_columns = ["split", "rank", "absolute_error", "true_score", "predicted_score", "text"]
    errors_description = "examples with the largest absolute error (|predicted - true score|)"
    model_card = card.SECTIONS

    def __init__(self):
        self.mean, self.std = 0.0, 1.0
        self.explanations = parts.ScoreExplained(self)
        self.distillation = parts.ScoreDistillation(self)

    def check_flags(self, config, require) -> None:
        d = config.data
        require(
            d.label_names is None,
            "--label-names",
            "has no meaning with --task regression (the label is a number, not a class)",
        )
        require(
            d.label_type == "auto",
            "--label-type",
            "has no meaning with --task regression (the label is read as a number)",
        )
        require(
            config.train.class_weights == "none",
            "--class-weights",
            "'balanced' needs classes; --task regression has none",
        )
        super().check_flags(config, require)

    # --- labels (ScoreLabels: a number per row)
    def describe_labels(self, spec) -> str:
        return "a number (regression target)"

    # --- the model
    def prepare(self, spec, train_labels) -> None:
        import numpy as np

        labels = np.asarray(train_labels, np.float64)
        self.mean, self.std = float(labels.mean()), float(labels.std())
        if not self.std > 0:
            raise UserError(f"training labels: every score is {labels[0]:g}; regression needs scores that vary")

    def output_units(self, labels) -> int:
        return 1

    def output_layer(self, outputs):
        from trainer.tasks.regression.keras import Destandardize

        return Destandardize(self.mean, self.std, name="score")(outputs)

    def loss(self):
        from trainer.tasks.regression.keras import StandardizedMSE

        return StandardizedMSE(self.std)

    def keras_metrics(self) -> list:
        import tf_keras

        return [tf_keras.metrics.MeanAbsoluteError(name="mae")]

    def summarize(self, outputs, labels, label_names) -> dict:
        import numpy as np

        from trainer.tasks.regression import scores

        predicted = np.asarray(outputs, np.float64).reshape(-1)
        labels = np.asarray(labels, np.float64).reshape(-1)
        metrics = scores.correlation_metrics(predicted, labels)
        return {"examples": int(len(labels)), "loss": metrics["mse"] / self.std**2, **metrics}

    def describe(self, result: dict) -> str:
        return (
            f"loss {result['loss']:.4f}  spearman {result['spearman']:.4f}  pearson "
            f"{result['pearson']:.4f}  mse {result['mse']:.4f}  mae {result['mae']:.4f}"
        )

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} mae {logs['mae']:.3f} | val loss {logs['val_loss']:.4f} "
            f"spearman {logs['val_spearman']:.3f} pearson {logs['val_pearson']:.3f} "
            f"mae {logs['val_mae']:.3f}"
        )

    # --- the export
    decision_variables = ("label_scale",)

    def export_decisions(self) -> dict:
        """Not a decision: the training labels' mean and standard deviation, kept so that a
        loaded export's loss is measured as the run's was (decide_as)."""
        return {"label_scale": [self.mean, self.std]}

    def serving_outputs(self, module, logits, batch) -> dict:
        """One `score` per text, in the training labels' units (the model maps its
        standardized output back itself)."""
        import tensorflow as tf

        return {"score": tf.reshape(logits, [batch])}

    # --- a loaded export's answers: its score
    def predicted_columns(self, outputs) -> dict:
        return {"predicted_score": outputs["score"]}

    def served_predictions(self, outputs) -> list:
        """`[{"score": ...}]`, as trainer.predict's predicted_score."""
        return [{"score": float(score)} for score in outputs["score"]]

    def agreement_value(self, outputs, labels, label_names) -> float:
        import numpy as np

        from trainer.tasks.regression import scores

        return scores.correlation_metrics(np.asarray(outputs).reshape(-1), labels)["spearman"]

    # --- the report
    def title(self, labels) -> str:
        return "score regressor"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions

        return SplitPredictions(
            texts, labels.astype(np.float64), None, None, scores=outputs.reshape(-1).astype(np.float64), pairs=pairs
        )

    def export_names(self, exported: dict) -> list:
        """No names: a score has no classes."""
        return []

    def decide_as(self, decisions: dict, temperature: float) -> None:
        """The training labels' scale the loss is measured in; unknown (NaN, a loss of NaN)
        for an export from before it held its scale."""
        self.mean, self.std = (float(v) for v in decisions.get("label_scale", (float("nan"),) * 2))

    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        return exported["score"]

    def error_measure(self, predictions, names) -> tuple:
        """absolute_error: |predicted score - true score|; a score has no right or wrong, so
        every row is ranked by its error."""
        import numpy as np

        p = predictions
        error = np.abs(p.scores.astype(np.float64) - p.labels)
        return (
            error,
            None,
            {
                "absolute_error": error,
                "true_score": p.labels.astype(np.float64),
                "predicted_score": p.scores.astype(np.float64),
            },
        )
