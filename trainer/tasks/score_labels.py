"""The labels of the kinds whose label is a score per row (regression, embeddings): any number,
read by regression's scores.py, no classes; trainer.prepare stratifies on score bins. Light like
the class modules (numpy imported when called)."""


class ScoreLabels:
    """A mixin before TextTask: a kind's label methods for a score per row."""

    def label_spec(self, frame, column, data):
        """A score: any number, no class names."""
        from trainer.data.labels import LabelSpec

        return LabelSpec("number", [])

    def encode_labels(self, frame, column, spec, split_name):
        from trainer.tasks.regression import scores

        return scores.encode_scores(frame, column, self.name)

    def label_counts(self, labels, spec) -> dict:
        return {}

    def label_summary(self, labels, spec) -> str:
        if not len(labels):
            return "no rows"
        return f"score mean {labels.mean():.4g}, min {labels.min():.4g}, max {labels.max():.4g}"

    def prepare_strata(self, labels, minimum):
        from trainer.tasks.regression import scores

        return scores.score_bins(labels, minimum)
