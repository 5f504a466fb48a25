"""Token classification's sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card
renders them into its template)."""

WHAT_IT_DOES = """\
Finds the entities of a text ({{ labels[1::2] | map("replace", "B-", "") | join(", ") }}) and tags its words.
It is a transformer encoder fine-tuned with a tag per word by vertex-bert-trainer
{{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}); the exported model takes raw
strings and returns each entity's text, type, character offsets and score, and each word's tag.
"""

METRICS = """\
Entity F1 {{ "%.4f" | format(eval_metrics.f1) }}, precision {{ "%.4f" | format(eval_metrics.precision) }},
recall {{ "%.4f" | format(eval_metrics.recall) }} (an entity counts when its type, first and last word are right).
"""

SECTIONS = {
    "what_it_does": WHAT_IT_DOES,
    "metrics": METRICS,
    "usage": 'out["entity_text"], out["entity_label"], out["entity_start"], out["entity_end"]  # padded: out["entity_count"] per text',
    "predict_columns": "`entities` (a JSON list of {text, label, start, end, score}) and `tags`",
    "counts_note": "",
}
