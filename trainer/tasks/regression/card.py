"""Regression's sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card renders
them into its template)."""

WHAT_IT_DOES = """\
Predicts a score for {{ "a pair of texts" if pair else "a text" }}, in the units of the training data's `{{ label_column }}` column.
It is a transformer encoder fine-tuned with a regression head by vertex-bert-trainer
{{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}); the exported model takes raw
strings and returns one score per {{ "pair" if pair else "text" }}.
"""

METRICS = """\
Spearman {{ "%.4f" | format(eval_metrics.spearman) }}, Pearson {{ "%.4f" | format(eval_metrics.pearson) }},
MSE {{ "%.4f" | format(eval_metrics.mse) }}, MAE {{ "%.4f" | format(eval_metrics.mae) }} (in the score's units).
"""

SECTIONS = {
    "what_it_does": WHAT_IT_DOES,
    "metrics": METRICS,
    "usage": 'out["score"]  # one score per text',
    "predict_columns": "`predicted_score`",
    "counts_note": "",
}
