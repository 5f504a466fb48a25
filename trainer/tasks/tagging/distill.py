"""Token classification's distillation: packed targets per word, then per token, the loss of
Hinton et al. 2015 over each tagged word, and tag accuracy of the labelled words.

Packed targets are [N, W, 1 + C] when the teacher's values are attached to a split's words
(trainer.tasks.tagging.teacher_file), and [N, S, 1 + C] once aligned to tokens as plain tag ids are
(tasks/tagging/tokens.py: a word's values on its first piece): channel 0 is the tag id, UNTAGGED
(-1) where no word is, UNLABELLED (-2) for a word of an unlabelled sentence; then the teacher's
probability of each tag, all 0 where the teacher gave none (a word past its --max-seq-length, or
null in its file): such a word learns from its true tag alone, or from nothing.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.tasks.classification.distill import softened_kl
from trainer.tasks.tagging.keras import TagAccuracy
from trainer.tasks.tagging.tags import UNTAGGED

UNLABELLED = -2  # channel 0 of a word whose sentence has no tags (an --unlabeled-file's)


def pack(labels, teacher) -> np.ndarray:
    """float32 [N, W, 1 + C] of plain tag ids [N, W] (None: unlabelled sentences) and the
    teacher's values [N, W, C] (NaN past a sentence's last word; rows renormalised to sum to
    exactly 1, as a file's are rounded)."""
    teacher = np.asarray(teacher, np.float64)
    words = ~np.isnan(teacher[..., 0])
    tags = np.where(words, UNLABELLED, UNTAGGED) if labels is None else np.asarray(labels)
    teacher = np.nan_to_num(teacher, nan=0.0)
    total = teacher.sum(axis=-1, keepdims=True)
    teacher = np.divide(teacher, total, out=np.zeros_like(teacher), where=total > 0)
    return np.concatenate([tags[..., None].astype(np.float64), teacher], axis=-1).astype(np.float32)


def unpack(packed) -> np.ndarray:
    return np.asarray(packed)[..., 0].astype(np.int32)


def tag_ids(labels) -> np.ndarray:
    """The tag ids of plain or packed labels (numpy)."""
    labels = np.asarray(labels)
    return unpack(labels) if labels.ndim == 3 else labels


def split(y_true):
    """(word [B, S] bool, labelled [B, S] bool, tag ids [B, S] int32, 0 where unlabelled,
    teacher [B, S, C]) of a packed batch."""
    y_true = tf.cast(y_true, tf.float32)
    tags = y_true[..., 0]
    labelled = tags >= 0
    return tags != UNTAGGED, labelled, tf.cast(tf.maximum(tags, 0.0), tf.int32), y_true[..., 1:]


class TagDistillationLoss(tf_keras.losses.Loss):
    """Per sentence: the mean over its words of alpha * cross-entropy of the word's true tag
    (where it has one) + (1 - alpha) * T^2 * KL(teacher at T || student at T) (where the teacher
    gave the word its probabilities), classification's loss word by word; a sentence without a
    word costs 0."""

    def __init__(self, temperature: float, alpha: float, name="tag_distillation", **kwargs):
        super().__init__(name=name, **kwargs)
        self.temperature, self.alpha = float(temperature), float(alpha)

    def call(self, y_true, y_pred):
        word, labelled, tags, teacher = split(y_true)
        logits = tf.cast(y_pred, tf.float32)
        hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tags, logits=logits)
        t = self.temperature
        kl = softened_kl(teacher, logits, t)
        taught = tf.reduce_sum(teacher, axis=-1) > 0
        per_token = self.alpha * tf.where(labelled, hard, 0.0) + (1.0 - self.alpha) * t * t * tf.where(taught, kl, 0.0)
        words = tf.cast(word, tf.float32)
        return tf.reduce_sum(per_token * words, axis=-1) / tf.maximum(tf.reduce_sum(words, axis=-1), 1.0)

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature, "alpha": self.alpha}


class LabelledTagAccuracy(TagAccuracy):
    """TagAccuracy of the labelled words of packed batches: an unlabelled word has no truth."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(tf.cast(y_true, tf.float32)[..., 0], y_pred, sample_weight)
