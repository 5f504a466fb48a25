"""Multi-label's sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card renders
them into its template), and its operating point in words."""

import json

from trainer.tasks.parts.threshold import wanted

WHAT_IT_DOES = """\
Tags {{ "a pair of texts" if pair else "a text" }} with any number (none included) of {{ labels | length }} labels: {{ labels | map("tojson") | join(", ") }}.
It is a transformer encoder fine-tuned with one sigmoid output per label by vertex-bert-trainer
{{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}); the exported model takes raw
strings and returns a probability per label and the labels whose probability reaches their own
threshold (chosen on the validation set).
{% if operating_point %}
{{ operating_point }}
{% endif %}
"""

METRICS = """\
Micro-F1 {{ "%.4f" | format(eval_metrics.micro_f1) }}, macro-F1 {{ "%.4f" | format(eval_metrics.macro_f1) }},
subset accuracy (every label right) {{ "%.4f" | format(eval_metrics.subset_accuracy) }}, loss {{ "%.4f" | format(eval_metrics.loss) }}.
{% if eval_metrics.get("caveat") %}
These figures are {{ eval_metrics.caveat }}.
{% endif %}

| label | threshold | precision | recall | F1 | support |
|---|---:|---:|---:|---:|---:|
{% for name in labels %}
{% set c = eval_metrics.per_label[name] %}
| {{ name }} | {{ "%.2f" | format(eval_metrics.thresholds[name]) }} | {{ "%.4f" | format(c.precision) }} | {{ "%.4f" | format(c.recall) }} | {{ "%.4f" | format(c.f1) }} | {{ c.support }} |
{% endfor %}
"""

SECTIONS = {
    "what_it_does": WHAT_IT_DOES,
    "metrics": METRICS,
    "usage": 'out["labels"], out["probabilities"]  # "label|label" above the thresholds; names: out["label_names"]',
    "predict_columns": "`predicted_labels` and `probability_<label>`",
    "counts_note": " A label's count is the rows carrying it.",
}


def operating_point(point: dict, labels) -> str:
    """What a multi-label model decides at metrics.json's `operating_point` block: a threshold
    per label, and which labels could not reach the target."""
    missed = [f"{json.dumps(name)} ({p['why']})" for name, p in point["labels"].items() if not p["reached"]]
    return (
        f"Each label is predicted when its probability reaches its threshold, chosen on "
        f"validation for {wanted(point)}"
        + (f"; out of reach there, these keep their F1-chosen threshold: {', '.join(missed)}" if missed else "")
        + "."
    )
