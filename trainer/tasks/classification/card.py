"""Classification's sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card
renders them into its template)."""

WHAT_IT_DOES = """\
Classifies {{ "a pair of texts" if pair else "a text" }} into one of {{ labels | length }} classes: {{ labels | map("tojson") | join(", ") }}.
It is a transformer encoder fine-tuned with a classification head by vertex-bert-trainer
{{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}); the exported model takes raw
{% if operating_point %}
strings and returns a probability per class and a label.
{{ operating_point }}
{% else %}
strings and returns a probability per class and the most likely label.
{% endif %}
"""

METRICS = """\
{% if operating_point %}
These figures count the exported model's decisions, at the threshold named under "What it does".

{% endif %}
Accuracy {{ "%.4f" | format(eval_metrics.accuracy) }}, macro-F1 {{ "%.4f" | format(eval_metrics.macro_f1) }},
macro-recall {{ "%.4f" | format(eval_metrics.macro_recall) }}, loss {{ "%.4f" | format(eval_metrics.loss) }}.

| class | precision | recall | F1 | support |
|---|---:|---:|---:|---:|
{% for name in labels %}
{% set c = eval_metrics.per_class[name] %}
| {{ name }} | {{ "%.4f" | format(c.precision) }} | {{ "%.4f" | format(c.recall) }} | {{ "%.4f" | format(c.f1) }} | {{ c.support }} |
{% endfor %}
"""

SECTIONS = {
    "what_it_does": WHAT_IT_DOES,
    "metrics": METRICS,
    "usage": 'out["label"], out["probabilities"]  # label names: out["label_names"]',
    "predict_columns": "`predicted_label` and `probability_<label>`",
    "counts_note": "",
}
