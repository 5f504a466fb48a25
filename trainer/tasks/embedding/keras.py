"""Embeddings' Keras pieces over the bi-encoder's [B, sides, H] vectors (model.py): the CoSENT loss
of scored pairs and the share of their pairs a batch orders right; the in-batch negatives' loss
of pairs without a score and the share of rows whose pair is the nearest of the batch's; the
supervised contrastive loss of labelled texts and its metric; a loss on leading dimensions."""

import tensorflow as tf
import tf_keras

from trainer.tasks.embedding.metrics import SCALE


def pair_cosines(vectors):
    """[B, sides, H] -> the cosine of each row's first two sides, float32 [B]."""
    vectors = tf.math.l2_normalize(tf.cast(vectors, tf.float32), axis=-1)
    return tf.reduce_sum(vectors[:, 0] * vectors[:, 1], axis=-1)


def ordered_pairs(scores, sample_weight=None):
    """[B, B] bool: (i, j) where row i's score is above row j's, both rows real (weight > 0)."""
    scores = tf.reshape(tf.cast(scores, tf.float32), [-1])
    above = scores[:, tf.newaxis] > scores[tf.newaxis, :]
    if sample_weight is None:
        return above
    real = tf.reshape(sample_weight, [-1]) > 0
    return above & real[:, tf.newaxis] & real[tf.newaxis, :]


class CoSENTLoss(tf_keras.losses.Loss):
    """log(1 + sum over pairs (i, j) with score_i > score_j of exp(SCALE * (cos_j - cos_i))):
    only the order of the scores matters (any range), and every pair of rows in the batch counts
    (Su 2022; sentence-transformers' CoSENTLoss). One value per batch: weight-0 rows (static
    shapes' padding) take no part in it."""

    def __init__(self, scale: float = SCALE, name="cosent", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)

    def __call__(self, y_true, y_pred, sample_weight=None):
        cosines = pair_cosines(y_pred) * self.scale
        differences = cosines[tf.newaxis, :] - cosines[:, tf.newaxis]  # [i, j]: cos_j - cos_i
        kept = tf.where(ordered_pairs(y_true, sample_weight), differences, -1e12)
        return tf.reduce_logsumexp(tf.concat([[0.0], tf.reshape(kept, [-1])], axis=0))

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


class Share(tf_keras.metrics.Metric):
    """A share over the batches of an epoch: the cases counted right over the cases counted
    (`count`), for the training metrics below."""

    def __init__(self, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.right = self.add_weight(name="right", initializer="zeros")
        self.cases = self.add_weight(name="cases", initializer="zeros")

    def count(self, right, cases) -> None:
        """Adds the bool tensors' True values: `right` among `cases`."""
        self.right.assign_add(tf.reduce_sum(tf.cast(right, tf.float32)))
        self.cases.assign_add(tf.reduce_sum(tf.cast(cases, tf.float32)))

    def result(self):
        return tf.math.divide_no_nan(self.right, self.cases)

    def reset_state(self):
        self.right.assign(0.0)
        self.cases.assign(0.0)


class PairOrder(Share):
    """The share of the pairs of rows (i, j), score_i > score_j within a batch, whose cosines
    are ordered alike: what CoSENT trains, logged while training."""

    def __init__(self, name="pair_order", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        cosines = pair_cosines(y_pred)
        ordered = ordered_pairs(y_true, sample_weight)
        self.count(ordered & (cosines[:, tf.newaxis] > cosines[tf.newaxis, :]), ordered)


def in_batch_logits(y_true, y_pred, sample_weight=None):
    """([B, C] logits of each row's first text against the batch's candidates, SCALE times their
    cosine: every row's second text (C = B; row i's own is candidate i), then, with a hard
    negative (a third side), every row's third (C = 2B); -inf where a candidate is not a
    negative: a positive of this row's query (the second text of any row with this first text,
    the row's own aside: a query asked twice, or a text repeated), this row's first text itself,
    or a padding row's text; [B] bool: the real rows)."""
    # Keras's loss container gives y_true a last axis of 1 when y_pred has one more axis.
    ids = tf.reshape(tf.cast(y_true, tf.int32), [tf.shape(y_pred)[0], -1])
    vectors = tf.math.l2_normalize(tf.cast(y_pred, tf.float32), axis=-1)
    sides = range(1, vectors.shape[1])
    candidates = tf.concat([vectors[:, side] for side in sides], axis=0)
    candidate_ids = tf.concat([ids[:, side] for side in sides], axis=0)
    logits = SCALE * tf.matmul(vectors[:, 0], candidates, transpose_b=True)
    first, second = ids[:, 0], ids[:, 1]
    same_query = tf.cast(first[:, tf.newaxis] == first[tf.newaxis, :], tf.float32)
    is_positive = tf.cast(second[:, tf.newaxis] == candidate_ids[tf.newaxis, :], tf.float32)
    relevant = tf.matmul(same_query, is_positive) > 0  # a second text of a row asking the same
    anchor = candidate_ids[tf.newaxis, :] == first[:, tf.newaxis]
    own = tf.eye(tf.shape(ids)[0], tf.shape(candidate_ids)[0], dtype=tf.bool)
    real = tf.ones_like(first, tf.bool) if sample_weight is None else tf.reshape(sample_weight, [-1]) > 0
    kept = (own | ~(relevant | anchor)) & tf.tile(real, [len(sides)])[tf.newaxis, :]
    return tf.where(kept, logits, -1e9), real


class MultipleNegativesLoss(tf_keras.losses.Loss):
    """Each row's second text against the batch's others (and every row's hard negative, when
    the rows have one) as negatives: the cross-entropy of picking it among them by SCALE times
    their cosines (Henderson et al. 2017; sentence-transformers' MultipleNegativesRankingLoss),
    the mean over the batch's real rows. A text repeated in the batch is never its own negative
    (in_batch_logits)."""

    def __init__(self, name="multiple_negatives", **kwargs):
        super().__init__(name=name, **kwargs)

    def __call__(self, y_true, y_pred, sample_weight=None):
        logits, real = in_batch_logits(y_true, y_pred, sample_weight)
        targets = tf.range(tf.shape(logits)[0])
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
        weights = tf.cast(real, tf.float32)
        return tf.math.divide_no_nan(tf.reduce_sum(losses * weights), tf.reduce_sum(weights))

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)


class InBatchTop(Share):
    """The share of rows whose own second text is the closest of the batch's candidates to
    their first text: what the in-batch-negatives loss trains, logged while training."""

    def __init__(self, name="in_batch_top", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        logits, real = in_batch_logits(y_true, y_pred, sample_weight)
        own = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), tf.range(tf.shape(logits)[0]))
        self.count(own & real, real)


def label_logits(y_true, y_pred, sample_weight=None):
    """([B, B] logits of each text against the batch's others, SCALE times their cosine, -inf on
    the diagonal and for padding rows; [B, B] bool: the other real rows of the same label)."""
    labels = tf.reshape(tf.cast(y_true, tf.int32), [-1])
    vectors = tf.math.l2_normalize(tf.cast(y_pred[:, 0], tf.float32), axis=-1)
    logits = SCALE * tf.matmul(vectors, vectors, transpose_b=True)
    real = tf.ones_like(labels, tf.bool) if sample_weight is None else tf.reshape(sample_weight, [-1]) > 0
    others = ~tf.eye(tf.shape(labels)[0], dtype=tf.bool) & real[tf.newaxis, :] & real[:, tf.newaxis]
    same = (labels[:, tf.newaxis] == labels[tf.newaxis, :]) & others
    return tf.where(others, logits, -1e9), same


class SupervisedContrastiveLoss(tf_keras.losses.Loss):
    """Each text's same-label texts in the batch against all its others: the mean over its
    positives of -log(softmax over the others) of SCALE times their cosines (Khosla et al. 2020,
    L_out; sentence-transformers' batch losses of labelled texts learn the same), the mean over
    the real rows that have a positive in the batch (the batch sampler gives most of them several:
    Task.rows_per_label)."""

    def __init__(self, name="supervised_contrastive", **kwargs):
        super().__init__(name=name, **kwargs)

    def __call__(self, y_true, y_pred, sample_weight=None):
        logits, same = label_logits(y_true, y_pred, sample_weight)
        log_softmax = logits - tf.reduce_logsumexp(logits, axis=1, keepdims=True)
        positives = tf.reduce_sum(tf.cast(same, tf.float32), axis=1)
        per_row = -tf.math.divide_no_nan(tf.reduce_sum(tf.where(same, log_softmax, 0.0), axis=1), positives)
        anchors = tf.cast(positives > 0, tf.float32)
        return tf.math.divide_no_nan(tf.reduce_sum(per_row * anchors), tf.reduce_sum(anchors))

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)


class NearestSameLabel(Share):
    """The share of texts whose nearest other text of the batch has their label (of those with
    one of their label in the batch): what the supervised contrastive loss trains."""

    def __init__(self, name="nearest_same_label", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        logits, same = label_logits(y_true, y_pred, sample_weight)
        nearest = tf.argmax(logits, axis=1, output_type=tf.int32)
        anchors = tf.reduce_any(same, axis=1)
        self.count(tf.gather(same, nearest, axis=1, batch_dims=1) & anchors, anchors)


class NestedDims(tf_keras.losses.Loss):
    """A loss of vectors on each of their leading parts alone, the mean of them (Matryoshka
    representation learning, Kusupati et al. 2022; sentence-transformers' MatryoshkaLoss with
    equal weights): --embedding-dims. Each inner loss normalizes the part it is given."""

    def __init__(self, inner, dims, name="nested_dims", **kwargs):
        super().__init__(name=name, **kwargs)
        self.inner, self.dims = inner, tuple(int(d) for d in dims)

    def __call__(self, y_true, y_pred, sample_weight=None):
        parts = [self.inner(y_true, y_pred[..., :d], sample_weight) for d in self.dims]
        return tf.add_n(parts) / float(len(parts))

    def call(self, y_true, y_pred):
        """The loss of a batch whose every row is real (Loss's per-row method: the one value)."""
        return self(y_true, y_pred)
