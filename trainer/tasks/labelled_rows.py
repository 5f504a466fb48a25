"""The masking every kind's distillation metric shares (issue #51): a distilled run's training
labels are packed with the teacher's targets (trainer.tasks.parts.teacher_targets), and its
unlabelled rows have none, so a training metric reads the labelled rows alone. Light like the
class modules (TensorFlow imported when called)."""


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
