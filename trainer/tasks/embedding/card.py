"""Embeddings' sections of MODEL_CARD.md (Task.model_card; trainer.reporting.model_card renders
them into its template)."""

WHAT_IT_DOES = """\
Turns a text into a vector (a sentence embedding) for search, similarity and clustering: two texts
mean alike when their vectors' cosine is high. It is a transformer encoder fine-tuned as a
bi-encoder by vertex-bert-trainer {{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}) on
pairs of texts and their similarity in the training data's `{{ label_column }}` column (CoSENT);
the exported model takes raw strings and returns one L2-normalized float32 vector per text, so
the dot product of two vectors is their cosine.
"""

METRICS = """\
Spearman {{ "%.4f" | format(eval_metrics.spearman) }}, Pearson {{ "%.4f" | format(eval_metrics.pearson) }}
of the cosine of each pair's vectors with its score.
"""

UNSCORED_WHAT_IT_DOES = """\
Turns a text into a vector (a sentence embedding) for search, similarity and clustering: two texts
mean alike when their vectors' cosine is high. It is a transformer encoder fine-tuned as a
bi-encoder by vertex-bert-trainer {{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}) on
pairs of texts without a score, each pair's second text (`{{ label_column }}`) trained to be the
nearest to its first among the other pairs' (in-batch negatives); the exported model takes raw
strings and returns one L2-normalized float32 vector per text, so the dot product of two vectors
is their cosine.
"""

UNSCORED_METRICS = """\
MRR@10 {{ "%.4f" | format(eval_metrics.mrr_at_10) }}, nDCG@10 {{ "%.4f" | format(eval_metrics.ndcg_at_10) }},
recall@1 {{ "%.4f" | format(eval_metrics.recall_at_1) }} and recall@10 {{ "%.4f" | format(eval_metrics.recall_at_10) }}
of each pair's second text ranked by cosine among every second text of the split, for its first.
"""

SECTIONS = {
    "what_it_does": WHAT_IT_DOES,
    "metrics": METRICS,
    "usage": 'out["embedding"]  # one unit-length vector per text: a @ b is their cosine',
    "predict_columns": "`embedding` (a JSON list of floats; to `--output vectors.npy`, one float32 array of them)",
    "counts_note": "",
}

UNSCORED_SECTIONS = {**SECTIONS, "what_it_does": UNSCORED_WHAT_IT_DOES, "metrics": UNSCORED_METRICS}

LABELLED_WHAT_IT_DOES = """\
Turns a text into a vector (a sentence embedding) for search, similarity and clustering: two texts
mean alike when their vectors' cosine is high. It is a transformer encoder fine-tuned by
vertex-bert-trainer {{ versions.trainer }} (TensorFlow {{ versions.tensorflow }}) on texts labelled with
classes in the training data's `{{ label_column }}` column, each text's vector trained to be nearer
the texts of its class than the others (supervised contrastive); the exported model takes raw
strings and returns one L2-normalized float32 vector per text, so the dot product of two vectors
is their cosine.
"""

LABELLED_METRICS = """\
kNN accuracy {{ "%.4f" | format(eval_metrics.knn_accuracy) }}: each text's class as the vote of its 5
nearest other texts of the split by cosine.
"""

LABELLED_SECTIONS = {**SECTIONS, "what_it_does": LABELLED_WHAT_IT_DOES, "metrics": LABELLED_METRICS}
