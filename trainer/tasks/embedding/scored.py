"""Sentence embeddings from pairs with a similarity score (STS style): the bi-encoder trained so
that the cosine of a pair's vectors follows its score (CoSENT, Su 2022, as sentence-transformers'
CoSENTLoss). The other variants of the kind (unscored.py) are this one trained otherwise: the
bi-encoder, its export, predictions and report are this class's.
"""

from trainer.tasks.base import TextTask
from trainer.tasks.embedding import card
from trainer.tasks.embedding.sides import SIDES_UNIT
from trainer.tasks.score_labels import ScoreLabels

LEARNING_RATE = 5e-5  # sentence-transformers' default (SentenceTransformerTrainingArguments)


class ScoredPairs(ScoreLabels, TextTask):
    name = "embedding"
    LOSS = "cosent"  # --loss's value
    losses = (LOSS, "multiple-negatives", "supervised-contrastive")  # the kind's: this, unscored.py's, labelled.py's
    sides = 2  # texts per row, each encoded alone (sides.py)
    pairs_in_windows = True  # so each is cut into windows alone (--long-texts windows)
    nests_dims = True
    # --embedding-dims: leading dimensions trained to work alone (Matryoshka), largest first;
    # () for the whole vector alone. Set by EmbeddingTask.with_settings.
    dims: tuple = ()
    unit = SIDES_UNIT
    metric_goals = {"val_spearman": "maximize", "val_pearson": "maximize", "val_loss": "minimize"}
    train_metric = "pair_order"
    summary_metrics = ("spearman", "pearson")
    loss_name = "CoSENT loss of scored pairs"
    label_column_names = TextTask.label_column_names + ("score", "similarity")
    exported_outputs = "unit-length vectors"
    decision_output = "embedding"
    export_mark = "embedding"
    answer_outputs = ("embedding",)
    agreement_metric = "spearman"
    zero_shot = True  # the encoder's own vectors, before training: the score to beat
    error_columns = ["split", "rank", "rank_gap", "true_score", "cosine", "text"]
    errors_description = "pairs whose cosine is ranked furthest from their score's rank"
    model_card = card.SECTIONS

    def __init__(self):
        from trainer.tasks.embedding.teacher import VectorDistillation

        self.distillation = VectorDistillation(self)

    def learning_rate(self, by_width: float, hidden_size: int) -> float:
        """sentence-transformers' rate, whatever the width: the encoder's vectors are already
        what the task wants, and a classifier's rate unlearns them (bench/embedding.py on STS-B,
        4 epochs: 3e-4, the 384-wide default, ends 2.1 points of Spearman below
        sentence-transformers; 5e-5 ends 0.3 below)."""
        return LEARNING_RATE

    def check_flags(self, config, require) -> None:
        d = config.data
        require(d.label_names is None, "--label-names", "has no meaning with --task embedding (the label is a score)")
        require(d.label_type == "auto", "--label-type", "has no meaning with --task embedding (the label is a score)")
        require(
            config.train.class_weights == "none",
            "--class-weights",
            "'balanced' needs classes; --task embedding trains on scored pairs",
        )
        super().check_flags(config, require)

    def check_loss(self, config, require) -> None:
        """--loss, and --embedding-dims: whole numbers from the largest down (the encoder's
        width bounds them when it loads: sides.py)."""
        super().check_loss(config, require)
        value = config.train.embedding_dims
        if value is None:
            return
        parts = [part.strip() for part in value.split(",")]
        example = "e.g. 384,256,128,64"
        require(
            all(part.isdigit() and int(part) > 0 for part in parts),
            "--embedding-dims",
            f"{value!r}: whole numbers above 0, comma-separated ({example})",
        )
        dims = [int(part) for part in parts]
        require(
            all(a > b for a, b in zip(dims, dims[1:])),
            "--embedding-dims",
            f"{value!r}: from the largest down, each once ({example})",
        )

    # --- labels (ScoreLabels): a score per pair, any range (CoSENT reads only their order)
    def describe_labels(self, spec) -> str:
        return "a similarity score (any range: only their order is learned)"

    # --- the model: vectors [N, sides, H]
    def output_units(self, labels) -> int:
        return 0  # no output layer: the sentence vector is the output

    def loss(self):
        from trainer.tasks.embedding.keras import CoSENTLoss

        return CoSENTLoss()

    def keras_metrics(self) -> list:
        from trainer.tasks.embedding.keras import PairOrder

        return [PairOrder()]

    def compiled_with(self, distillation=None) -> tuple:
        """The variant's loss, or with --embedding-dims the mean of it on each leading part."""
        loss, keras_metrics = super().compiled_with(distillation)
        if not self.dims:
            return loss, keras_metrics
        from trainer.tasks.embedding.keras import NestedDims

        return NestedDims(loss, self.dims), keras_metrics

    def summarize(self, outputs, labels, label_names) -> dict:
        """The variant's figures of the whole vectors, and with --embedding-dims of each
        leading part alone (`dims`: {"256": {...}, ...})."""
        import numpy as np

        block = self.split_metrics(outputs, labels)
        if self.dims:
            vectors = np.asarray(outputs)
            block["dims"] = {str(d): self.split_metrics(vectors[..., :d], labels) for d in self.dims}
        return block

    def split_metrics(self, outputs, labels) -> dict:
        from trainer.tasks.embedding import metrics

        return metrics.scored_pairs(outputs, labels)

    def describe(self, result: dict) -> str:
        return f"loss {result['loss']:.4f}  spearman {result['spearman']:.4f}  pearson {result['pearson']:.4f}"

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} pair order {logs['pair_order']:.3f} | val loss {logs['val_loss']:.4f} "
            f"spearman {logs['val_spearman']:.4f} pearson {logs['val_pearson']:.4f}"
        )

    # --- the export: one text in, its unit-length vector out
    def serving_outputs(self, module, logits, batch) -> dict:
        """`embedding`, and with --embedding-dims each leading part as `embedding_<d>` (the
        whole width's too, equal to `embedding`: every copy's graph returns the same names),
        each of unit length."""
        import tensorflow as tf

        vectors = tf.cast(logits, tf.float32)
        parts = {f"embedding_{d}": vectors[:, :d] for d in self.dims}
        return {name: tf.math.l2_normalize(v, axis=-1) for name, v in {"embedding": vectors, **parts}.items()}

    def predicted_columns(self, outputs) -> dict:
        import numpy as np

        vectors = np.empty(len(outputs["embedding"]), dtype=object)
        vectors[:] = [[float(x) for x in row] for row in outputs["embedding"]]
        return {"embedding": vectors}

    compares_pairs = True
    array_columns = ("embedding", "pair_embedding")

    def compared_columns(self, outputs, pair_outputs) -> dict:
        """A file of two texts per row: each text's vector, and their cosine (the dot product
        of unit vectors)."""
        import numpy as np

        cosines = np.sum(np.asarray(outputs["embedding"]) * np.asarray(pair_outputs["embedding"]), axis=1)
        columns = self.predicted_columns(outputs)
        pair_columns = self.predicted_columns(pair_outputs)
        return {**columns, "pair_embedding": pair_columns["embedding"], "cosine": cosines.astype(np.float64)}

    def served_predictions(self, outputs) -> list:
        return [{"embedding": [float(x) for x in row]} for row in outputs["embedding"]]

    # A copy (int8, bfloat16, ONNX) is checked on its vectors: the share of validation texts
    # whose vector is within COPY_COSINE of float32's (agreement.MIN_LABEL_AGREEMENT of them
    # must be), and the Spearman it moves.
    agreement_of = "vectors"

    def agreement_decisions(self, outputs):
        return outputs

    def decisions_agree(self, ours, theirs) -> float:
        from trainer.tasks.embedding import metrics

        return metrics.share_alike(ours, theirs)

    def agreement_value(self, outputs, labels, label_names) -> float:
        """The variant's agreement_metric of a copy's vectors (every variant's)."""
        return self.split_metrics(outputs, labels)[self.agreement_metric]

    # --- the report
    def title(self, labels) -> str:
        return "sentence embedding model"

    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions
        from trainer.tasks.embedding import metrics

        cosines = metrics.pair_cosines(outputs)
        vectors = metrics.normalized(outputs).astype(np.float32)
        return SplitPredictions(
            texts, labels.astype(np.float64), None, None, scores=cosines, pairs=pairs, vectors=vectors
        )

    figures = ("similarity",)

    def nearest_neighbours(self, predictions) -> list:
        from trainer.tasks.embedding import neighbours

        return neighbours.nearest(predictions["validation"]) if "validation" in predictions else []

    def export_names(self, exported: dict) -> list:
        return []

    def outputs_of_export(self, exported: dict, temperature: float, sentences=None):
        return exported["embedding"]

    def error_measure(self, predictions, names) -> tuple:
        """rank_gap: how far apart a pair's cosine and its score rank among the split's pairs
        (0 to 1): a score has no right or wrong, so every pair is ranked by its gap. Cosines
        equal to 6 decimals (as errors.csv prints them) rank as ties: two pairs of identical texts
        have a cosine of 1 give or take one float32 rounding, which the CPU's vector width and
        the graph decide (on an AVX-512 Xeon the run's model and its export ranked two such
        pairs in opposite orders)."""
        import numpy as np
        from scipy import stats

        p = predictions
        scale = max(len(p.labels) - 1, 1)
        gap = np.abs(stats.rankdata(np.round(p.scores, 6)) - stats.rankdata(p.labels)) / scale
        return gap, None, {"rank_gap": gap, "true_score": p.labels.astype(np.float64), "cosine": p.scores}
