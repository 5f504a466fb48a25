"""A distilled run's task (issue #51): the run's task kind, trained on packed targets.

With a teacher (--teacher, --teacher-probabilities) every training and unlabelled row's labels
are packed with the teacher's outputs (Task.pack_targets), and `Distilled` is the run's task
object. It is the task kind in every respect but what packed labels change: the loss and the
training metrics read them, and summarize and label_counts take them as well as plain labels.

It delegates rather than subclasses: the kind is chosen at run time (any of the registry's), and
everything the kind decides after training (multi-label's thresholds, a classifier's operating
point) must land on the one object the export, the report and the final metrics ask. Reads of
anything else reach the kind's object, and so do writes.

Also here, light like the class modules (TensorFlow imported when called): the masking every
kind's training metric shares (LabelledRowsOnly).
"""


class Distilled:
    def __init__(self, task, temperature: float, alpha: float):
        # Kept in this object's own __dict__: every other write goes to the kind's object.
        vars(self).update(task=task, temperature=float(temperature), alpha=float(alpha))

    def __getattr__(self, name):  # only for what this object does not define itself
        return getattr(vars(self)["task"], name)

    def __setattr__(self, name, value):
        setattr(self.task, name, value)

    def loss(self):
        return self.task.distillation_loss(self.temperature, self.alpha)

    def keras_metrics(self) -> list:
        return self.task.distillation_metrics()

    def summarize(self, outputs, labels, label_names) -> dict:
        return self.task.summarize(outputs, self.plain(labels), label_names)

    def label_counts(self, labels, spec) -> dict:
        return self.task.label_counts(self.plain(labels), spec)

    def plain(self, labels):
        """`labels` as the kind's plain labels, unpacked if they are packed."""
        return self.task.unpack_labels(labels) if self.task.is_packed(labels) else labels


class LabelledRowsOnly:
    """A mixin before a Keras metric class: the metric of a packed batch's labelled rows alone.
    An unlabelled row weighs 0, so a batch without labelled rows changes nothing. Each kind's
    subclass defines `labelled_rows(y_true, y_pred)`: (labelled [B] bool, the plain labels, the
    predictions) of a packed batch, as the wrapped metric takes them (a finite label on every
    row)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        import tensorflow as tf

        labelled, y_true, y_pred = self.labelled_rows(y_true, y_pred)
        weight = tf.cast(labelled, tf.float32)
        if sample_weight is not None:  # Keras gives it as [B, 1] beside [B, C] outputs
            weight *= tf.reshape(tf.cast(sample_weight, tf.float32), [-1])
        return super().update_state(y_true, y_pred, sample_weight=weight)
