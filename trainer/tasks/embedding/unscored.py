"""Sentence embeddings from pairs without a score (a question and its answer, a text and its
paraphrase): `--task embedding` on such a file, or `--loss multiple-negatives`. Each pair's
second text is its first's positive and every other row's second text in the batch a negative
(in-batch negatives: sentence-transformers' MultipleNegativesRankingLoss), and a split is scored
as a retrieval task (retrieval.py). The rest, the bi-encoder, its export, predictions and
report, is ScoredPairs': the same vectors, trained otherwise.

Its labels are the pair's texts themselves, as ids (retrieval.pair_ids), so that a text repeated
in a batch is never its own negative. A third text column (--negative-column, or one named
negative) is each row's hard negative: one more candidate of the batch, trained against as the
other rows' texts are (triplets: anchor, positive, negative); the splits are scored on the pairs.
"""

from trainer.tasks.embedding import card
from trainer.tasks.embedding.scored import ScoredPairs


class UnscoredPairs(ScoredPairs):
    LOSS = "multiple-negatives"  # --loss's value
    hard_negatives = True
    metric_goals = {
        "val_mrr_at_10": "maximize",
        "val_ndcg_at_10": "maximize",
        "val_recall_at_1": "maximize",
        "val_recall_at_10": "maximize",
        "val_loss": "minimize",
    }
    train_metric = "in_batch_top"
    summary_metrics = ("mrr_at_10", "ndcg_at_10", "recall_at_1", "recall_at_10")
    loss_name = "in-batch negatives loss of pairs"
    agreement_metric = "mrr_at_10"
    error_columns = ["split", "rank", "positive_rank", "cosine", "text"]
    errors_description = "pairs whose second text ranks lowest among the candidates for their first"
    figures = ()
    model_card = card.UNSCORED_SECTIONS

    # --- labels: the pair's two texts (and hard negative), as ids among the split's distinct texts
    def label_columns(self, first, data) -> tuple:
        """The pair's columns, and the hard negative's when `first` has it (a file scored by
        trainer.evaluate needs only the pairs)."""
        from trainer import reading

        columns = reading.pick_text_columns(first, data.text_column, data.text_pair_column)
        if columns[1] is None:
            return columns[0], [columns[0]]  # Sides.load says a pair is needed
        negative = data.negative_column
        found = [negative] if negative and reading.find_column(first, negative) else []
        return columns[1], [*columns, *found]

    def label_spec(self, frame, column, data):
        from trainer.data.labels import LabelSpec

        return LabelSpec("pair", [])

    def encode_labels(self, frame, column, spec, split_name):
        from trainer.tasks.embedding import retrieval

        return retrieval.pair_ids(frame, [c for c in frame.columns if not str(c).startswith("_")])

    def describe_labels(self, spec) -> str:
        return (
            "the pair itself (no score): each pair's second text is its first's positive, "
            "the batch's others its negatives"
        )

    def label_summary(self, labels, spec) -> str:
        import numpy as np

        if not len(labels):
            return "no rows"
        counts = [f"{len(np.unique(labels[:, side])):,}" for side in range(labels.shape[1])]
        negatives = f", {counts[2]} hard negatives" if len(counts) > 2 else ""
        return f"{counts[0]} distinct first texts, {counts[1]} second{negatives}"

    def prepare_strata(self, labels, minimum):
        """One stratum: pairs have no class to keep in proportion."""
        import numpy as np

        return np.zeros(len(labels), np.int64)

    def check_flags(self, config, require) -> None:
        require(
            config.data.label_column is None,
            "--label-column",
            "has no meaning with --loss multiple-negatives (a pair's second text is its label)",
        )
        super().check_flags(config, require)

    # --- the model
    def loss(self):
        from trainer.tasks.embedding.keras import MultipleNegativesLoss

        return MultipleNegativesLoss()

    def keras_metrics(self) -> list:
        from trainer.tasks.embedding.keras import InBatchTop

        return [InBatchTop()]

    def split_metrics(self, outputs, labels) -> dict:
        from trainer.tasks.embedding import retrieval

        return retrieval.ranked_pairs(outputs, labels)

    def describe(self, result: dict) -> str:
        return (
            f"loss {result['loss']:.4f}  mrr@10 {result['mrr_at_10']:.4f}  ndcg@10 {result['ndcg_at_10']:.4f}  "
            f"recall@1 {result['recall_at_1']:.4f}  recall@10 {result['recall_at_10']:.4f}"
        )

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} in-batch top {logs['in_batch_top']:.3f} | val loss {logs['val_loss']:.4f} "
            f"mrr@10 {logs['val_mrr_at_10']:.4f} recall@1 {logs['val_recall_at_1']:.4f}"
        )

    # --- the report
    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions
        from trainer.tasks.embedding import metrics

        vectors = metrics.normalized(outputs).astype(np.float32)
        return SplitPredictions(
            texts, np.asarray(labels), None, None, scores=metrics.pair_cosines(outputs), pairs=pairs, vectors=vectors
        )

    def cosine_histograms(self, predictions) -> list:
        """Each pair's cosine beside its first text's to the nearest second text of the split
        that is none of its pairs (retrieval.nearest_negatives)."""
        from trainer.tasks.embedding import retrieval

        groups = {
            name: {"its pair": p.scores, "nearest other text": retrieval.nearest_negatives(p.vectors, p.labels)}
            for name, p in predictions.items()
        }
        return [
            {
                "file": "nearest_negatives.png",
                "title": "Cosine of each pair and of the nearest text that is not its pair",
                "groups": groups,
                "panel": "cosine to a pair's first text",
                "counted": "pairs",
                "note": "For each pair's first text: the cosine to its own second text, and to the nearest "
                "second text of the split that is none of its pairs: the further apart the two "
                "histograms, the surer a search finds the pair first.",
            }
        ]

    def error_measure(self, predictions, names) -> tuple:
        """positive_rank: where a pair's second text ranks among the split's candidates for its
        first (1: first), the others of that text's positives set aside; worst first."""
        import numpy as np

        from trainer.tasks.embedding import retrieval

        p = predictions
        ranks = retrieval.positive_ranks(p.vectors, p.labels)
        gap = (ranks - 1) / max(len(np.unique(p.labels[:, 1])) - 1, 1)
        return gap, None, {"positive_rank": ranks, "cosine": p.scores}
