"""Sentence embeddings from single texts labelled with classes (intents, topics, products): each
text's vector trained to be nearer the batch's texts of its class than the others (supervised
contrastive, Khosla et al. 2020), the batches made of runs of a few texts per class
(Task.rows_per_label), and a split scored by kNN accuracy (classes.py): how well a nearest-
neighbour vote over the vectors recovers the classes. `--task embedding` on such a file, or
`--loss supervised-contrastive`. The export, predictions and copies are ScoredPairs': one text
in, its unit-length vector out.
"""

from trainer.tasks.base import TextTask
from trainer.tasks.class_labels import ClassLabels
from trainer.tasks.embedding import card
from trainer.tasks.embedding.scored import ScoredPairs


class LabelledTexts(ClassLabels, ScoredPairs):
    LOSS = "supervised-contrastive"  # --loss's value
    sides = 1
    rows_per_label = 4  # texts of a class together in a batch: most have 3 positives or more
    label_column_names = TextTask.label_column_names
    metric_goals = {"val_knn_accuracy": "maximize", "val_loss": "minimize"}
    train_metric = "nearest_same_label"
    summary_metrics = ("knn_accuracy",)
    loss_name = "supervised contrastive loss of labelled texts"
    agreement_metric = "knn_accuracy"
    error_columns = ["split", "rank", "true_label", "neighbours_label", "agreeing", "text"]
    errors_description = "texts whose nearest other texts are least of their class"
    figures = ()
    model_card = card.LABELLED_SECTIONS

    def check_flags(self, config, require) -> None:
        """A class per text, so --label-names and --label-type mean what they do for a
        classifier; a loss of the batch's texts has no weight per class."""
        require(
            config.train.class_weights == "none",
            "--class-weights",
            "'balanced' weighs each row's loss; --loss supervised-contrastive compares texts in a batch",
        )
        TextTask.check_flags(self, config, require)

    def describe_labels(self, spec) -> str:
        return TextTask.describe_labels(self, spec)

    def label_summary(self, labels, spec) -> str:
        return TextTask.label_summary(self, labels, spec)

    # --- the model: vectors [N, 1, H]
    def loss(self):
        from trainer.tasks.embedding.keras import SupervisedContrastiveLoss

        return SupervisedContrastiveLoss()

    def keras_metrics(self) -> list:
        from trainer.tasks.embedding.keras import NearestSameLabel

        return [NearestSameLabel()]

    def split_metrics(self, outputs, labels) -> dict:
        from trainer.tasks.embedding import classes

        return classes.labelled_texts(outputs, labels)

    def describe(self, result: dict) -> str:
        return f"loss {result['loss']:.4f}  knn accuracy {result['knn_accuracy']:.4f}"

    def describe_epoch(self, logs: dict) -> str:
        return (
            f"loss {logs['loss']:.4f} nearest same label {logs['nearest_same_label']:.3f} | "
            f"val loss {logs['val_loss']:.4f} knn accuracy {logs['val_knn_accuracy']:.4f}"
        )

    def export_names(self, exported: dict):
        """None: the export returns vectors alone, so a labelled file's classes are its own
        (trainer.evaluate reads them from it)."""
        return None

    # --- the report
    def split_predictions(self, outputs, labels, texts, pairs, temperature: float):
        import numpy as np

        from trainer.inference.split_predictions import SplitPredictions
        from trainer.tasks.embedding import classes

        vectors = classes.single(outputs).astype(np.float32)[:, np.newaxis]
        return SplitPredictions(texts, np.asarray(labels), None, None, vectors=vectors)

    def cosine_histograms(self, predictions) -> list:
        """Each text's cosine to its nearest text of its class beside that to its nearest of
        another (classes.nearest_by_class)."""
        from trainer.tasks.embedding import classes

        groups = {}
        for name, p in predictions.items():
            same, other = classes.nearest_by_class(p.vectors, p.labels)
            groups[name] = {"nearest text of its class": same, "nearest of another class": other}
        return [
            {
                "file": "nearest_classes.png",
                "title": "Cosine of each text to its nearest text of its class and of another",
                "groups": groups,
                "panel": "cosine to each text",
                "counted": "texts",
                "note": "For each text: the cosine to the nearest other text of its class, and to the "
                "nearest text of another class: the further apart the two histograms, the more a "
                "text's neighbours share its class (kNN accuracy counts the votes of the nearest five).",
            }
        ]

    def error_measure(self, predictions, names) -> tuple:
        """1 - the share of a text's nearest other texts (classes.K) of its class; worst first."""
        import numpy as np

        from trainer.tasks.embedding import classes

        p = predictions
        voted, agreeing = classes.neighbour_votes(p.vectors, p.labels)
        names = np.asarray(names, dtype=object)
        return (
            1.0 - agreeing,
            None,
            {"true_label": names[p.labels], "neighbours_label": names[voted], "agreeing": agreeing},
        )
