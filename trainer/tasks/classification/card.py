"""Classification's sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card
renders them into its template), and its operating point in words."""

import json

from trainer.tasks.parts.threshold import rate, wanted

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


def operating_point(point: dict, labels) -> str:
    """What a binary classifier decides at metrics.json's `operating_point` block, in one or
    two sentences naming the threshold."""
    positive, negative = json.dumps(point["positive_label"]), json.dumps(labels[0])
    if not point["reached"]:
        return (
            f"--target-{point['target']} {point['value']:g} was out of reach on validation "
            f"({point['why']}), so the model predicts the more probable label: {positive} "
            f"when its probability is at least 0.5, otherwise {negative}."
        )
    test = point.get("test")
    return (
        f"The model predicts {positive} when its probability of {positive} is at least "
        f"{point['threshold']:.3f}, otherwise {negative}: a threshold chosen on validation for "
        f"{wanted(point)}, where it reaches precision {rate(point['validation']['precision'])} and "
        f"recall {rate(point['validation']['recall'])}"
        + (f" (test: precision {rate(test['precision'])}, recall {rate(test['recall'])})" if test else "")
        + "."
    )
