"""The labels of the kinds whose label is a class per row (classification; embeddings of labelled
texts): read by classification's labels.py, checked for typos and tiny classes, counted, and
stratified on. Light like the class modules (numpy imported when called)."""

from trainer.errors import UserError


class ClassLabels:
    """A mixin before TextTask: a kind's label methods for one class per row."""

    def label_spec(self, frame, column, data):
        from trainer.tasks.classification import labels

        return labels.infer_labels(frame, column, data)

    def encode_labels(self, frame, column, spec, split_name):
        from trainer.tasks.classification import labels

        return labels.encode_labels(frame, column, spec, split_name)

    def check_labels(self, frame, column, labels, spec, data) -> None:
        from trainer.tasks.classification import labels as labels_lib

        labels_lib.check_classes(frame, column, labels, spec, data)

    def check_training_labels(self, frame, column, labels, spec, data, source) -> None:
        """Each class with rows, none a typo (too few rows, or a case variant of another), at
        least two."""
        import numpy as np

        from trainer.tasks.classification import labels as labels_lib

        labels_lib.check_class_sizes(frame, column, labels, spec, data.min_examples_per_class)
        self.check_labels(frame, column, labels, spec, data)
        present = np.unique(labels)
        if len(present) < 2:
            raise UserError(
                f"{source}: training data holds a single class "
                f"({spec.names[present[0]]!r}); --task {self.name} needs at least two"
            )

    def label_counts(self, labels, spec) -> dict:
        import numpy as np

        counts = np.bincount(labels, minlength=len(spec.names))
        return {name: int(count) for name, count in zip(spec.names, counts)}

    def held_out_strata(self, labels):
        return labels

    def prepare_strata(self, labels, minimum):
        return labels
