"""Embeddings' losses and training metrics (trainer/tasks/embedding/keras.py): CoSENT over every
ordered pair of a batch's rows, and the share of those pairs whose cosines are ordered alike; in-batch
negatives for pairs without a score, and the share of rows whose pair is nearest; the supervised
contrastive loss of labelled texts, and the share of texts whose nearest text shares their class."""

import numpy as np
import tensorflow as tf

from trainer.tasks.embedding.keras import (
    SCALE,
    CoSENTLoss,
    InBatchTop,
    MultipleNegativesLoss,
    NearestSameLabel,
    NestedDims,
    PairOrder,
    SupervisedContrastiveLoss,
)


def rows(*cosines):
    """[B, 2, 2] vectors whose pairs have these cosines: (1, 0) against (c, sqrt(1 - c^2))."""
    return tf.constant([[[1.0, 0.0], [c, np.sqrt(1 - c * c)]] for c in cosines], tf.float32)


def test_the_loss_is_log_one_plus_the_exponentials_of_every_misordered_difference():
    # scores 3 > 2 > 1; cosines 0.2, 0.5, 0.1: pairs (0,1), (0,2), (1,2), each exp(20 (cos_j - cos_i)).
    cosines, scores = [0.2, 0.5, 0.1], [3.0, 2.0, 1.0]
    terms = [SCALE * (cosines[j] - cosines[i]) for i, j in ((0, 1), (0, 2), (1, 2))]
    expected = np.log1p(np.sum(np.exp(terms)))
    loss = CoSENTLoss()(tf.constant(scores), rows(*cosines)).numpy()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_only_the_order_of_the_scores_counts():
    vectors = rows(0.9, 0.3, -0.2, 0.4)
    loss = CoSENTLoss()
    np.testing.assert_allclose(
        loss(tf.constant([5.0, 2.0, 0.0, 3.0]), vectors).numpy(),
        loss(tf.constant([0.9, 0.2, -7.0, 0.5]), vectors).numpy(),
        rtol=1e-6,
    )


def test_equal_scores_make_no_pair_and_a_batch_without_pairs_costs_nothing():
    assert CoSENTLoss()(tf.constant([1.0, 1.0]), rows(0.9, -0.9)).numpy() == 0.0


def test_a_weight_0_row_takes_no_part():
    """Static shapes pad the last batch with weight-0 rows: the loss is that of the real rows."""
    real = CoSENTLoss()(tf.constant([3.0, 1.0]), rows(0.1, 0.6)).numpy()
    padded = CoSENTLoss()(
        tf.constant([3.0, 1.0, 9.0]), rows(0.1, 0.6, -1.0), sample_weight=tf.constant([1.0, 1.0, 0.0])
    )
    np.testing.assert_allclose(padded.numpy(), real, rtol=1e-6)


def test_the_loss_is_the_same_vectors_at_any_length():
    """Cosines, not dot products: scaling a side's vector changes nothing."""
    vectors = rows(0.2, 0.7)
    np.testing.assert_allclose(
        CoSENTLoss()(tf.constant([1.0, 2.0]), vectors * 3.0).numpy(),
        CoSENTLoss()(tf.constant([1.0, 2.0]), vectors).numpy(),
        rtol=1e-6,
    )


def test_pair_order_counts_the_pairs_ordered_alike_over_batches():
    metric = PairOrder()
    metric.update_state(tf.constant([3.0, 2.0, 1.0]), rows(0.9, 0.1, 0.5))  # (0,1) (0,2) right, (1,2) wrong
    metric.update_state(tf.constant([1.0, 2.0]), rows(0.0, 0.3))  # right
    assert metric.result().numpy() == np.float32(3 / 4)


# --- in-batch negatives: pairs without a score -------------------------------------------------


def pairs(*vectors):
    """[B, sides, 2] rows (first, second[, negative]) of 2-d vectors."""
    return tf.constant(vectors, tf.float32)


def test_each_row_picks_its_own_second_text_among_the_batch():
    # Cosines of each row's first text with the batch's second texts: row 0 (0.8, 0.6), row 1 (0.6, 0.8).
    vectors = pairs([[1.0, 0.0], [0.8, 0.6]], [[0.0, 1.0], [0.6, 0.8]])
    logits = SCALE * np.array([[0.8, 0.6], [0.6, 0.8]])
    expected = np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)])
    loss = MultipleNegativesLoss()(tf.constant([[0, 1], [2, 3]]), vectors).numpy()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_a_text_repeated_in_the_batch_is_not_its_own_negative():
    """Two rows of one second text (id 1): each sees the other's copy of its positive set aside,
    so it costs nothing; unmasked it would cost log 2."""
    vectors = pairs([[1.0, 0.0], [1.0, 0.0]], [[0.6, 0.8], [1.0, 0.0]])
    assert MultipleNegativesLoss()(tf.constant([[0, 1], [2, 1]]), vectors).numpy() == 0.0


def test_a_first_text_asked_twice_does_not_count_its_other_positive_against_it():
    vectors = pairs([[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.6, 0.8]])
    assert MultipleNegativesLoss()(tf.constant([[0, 1], [0, 2]]), vectors).numpy() == 0.0


def test_in_batch_a_weight_0_row_takes_no_part():
    ids, vectors = tf.constant([[0, 1], [2, 3]]), pairs([[1.0, 0.0], [0.6, 0.8]], [[0.0, 1.0], [1.0, 0.0]])
    padded_ids = tf.concat([ids, [[4, 5]]], axis=0)
    padded = tf.concat([vectors, pairs([[1.0, 0.0], [1.0, 0.0]])], axis=0)
    np.testing.assert_allclose(
        MultipleNegativesLoss()(padded_ids, padded, tf.constant([1.0, 1.0, 0.0])).numpy(),
        MultipleNegativesLoss()(ids, vectors).numpy(),
        rtol=1e-6,
    )


def test_the_ids_may_come_with_the_last_axis_keras_adds():
    ids, vectors = tf.constant([[0, 1], [2, 3]]), pairs([[1.0, 0.0], [0.6, 0.8]], [[0.0, 1.0], [1.0, 0.0]])
    loss = MultipleNegativesLoss()
    np.testing.assert_allclose(loss(ids[..., tf.newaxis], vectors).numpy(), loss(ids, vectors).numpy(), rtol=1e-6)


def test_a_hard_negative_is_one_more_candidate_of_every_row():
    """Triplets (first, second, negative): each row picks its second text among the batch's
    second texts and every row's negative."""
    first, second, negative = [1.0, 0.0], [0.8, 0.6], [0.6, 0.8]
    vectors = pairs([first, second, negative], [first, second, negative])
    # One query asked twice with one positive (id 1): the other row's copy is set aside, and
    # each row's candidates are its own second text (0.8) and both rows' negatives (0.6, 0.6).
    logits = SCALE * np.array([0.8, 0.6, 0.6])
    expected = np.log(np.exp(logits).sum()) - logits[0]
    ids = tf.constant([[0, 1, 2], [0, 1, 3]])
    np.testing.assert_allclose(MultipleNegativesLoss()(ids, vectors).numpy(), expected, rtol=1e-5)


def test_a_negative_that_is_a_rows_own_positive_is_not_counted_against_it():
    """Row 1's negative is row 0's second text (id 1): for row 0 it is no negative, so nothing
    competes with its positive; counted, it would cost row 0 log 2."""
    vectors = pairs([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    assert MultipleNegativesLoss()(tf.constant([[0, 1, 2], [3, 4, 1]]), vectors).numpy() < 1e-6


def test_in_batch_top_is_the_share_of_rows_whose_pair_is_nearest():
    metric = InBatchTop()
    # Row 0's second text is nearest its first; row 1's first is nearer row 0's second text.
    metric.update_state(tf.constant([[0, 1], [2, 3]]), pairs([[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]))
    assert metric.result().numpy() == 0.5


# --- labelled texts: the batch's texts of a class against its others --------------------------------


def texts(*degrees):
    """[B, 1, 2]: one unit vector per row, at these angles."""
    radians = np.radians(degrees)
    return tf.constant(np.stack([np.cos(radians), np.sin(radians)], axis=1)[:, np.newaxis], tf.float32)


def test_the_supervised_loss_is_the_mean_log_softmax_of_each_texts_class_mates():
    vectors, labels = texts(0, 60, 30), tf.constant([0, 0, 1])
    cosines = np.cos(np.radians([[0, 60, 30], [60, 0, 30], [30, 30, 0]]))
    logits = SCALE * cosines
    # rows 0 and 1 each have one class mate; row 2 has none and takes no part.
    expected = np.mean(
        [np.log(np.exp(logits[i, [j for j in range(3) if j != i]]).sum()) - logits[i, 1 - i] for i in (0, 1)]
    )
    np.testing.assert_allclose(SupervisedContrastiveLoss()(labels, vectors).numpy(), expected, rtol=1e-5)


def test_the_supervised_loss_ignores_weight_0_rows():
    vectors, labels = texts(0, 60, 180), tf.constant([0, 0, 1])
    padded = tf.concat([vectors, texts(5)], axis=0)
    np.testing.assert_allclose(
        SupervisedContrastiveLoss()(tf.constant([0, 0, 1, 0]), padded, tf.constant([1.0, 1.0, 1.0, 0.0])).numpy(),
        SupervisedContrastiveLoss()(labels, vectors).numpy(),
        rtol=1e-6,
    )


def test_nearest_same_label_counts_the_texts_with_a_class_mate_in_the_batch():
    metric = NearestSameLabel()
    # Row 0's nearest is row 1 (its class), row 1's is row 2 (another class); row 3 has no mate.
    metric.update_state(tf.constant([0, 0, 1, 2]), texts(0, 50, 60, 180))
    assert metric.result().numpy() == 0.5


def test_nested_dims_average_the_loss_of_each_leading_part():
    ids = tf.constant([[0, 1], [2, 3]])
    vectors = tf.constant([[[1.0, 0.0, 0.5], [0.8, 0.6, -1.0]], [[0.0, 1.0, 0.2], [0.6, 0.8, 0.9]]])
    inner = MultipleNegativesLoss()
    expected = (inner(ids, vectors).numpy() + inner(ids, vectors[..., :2]).numpy()) / 2
    np.testing.assert_allclose(NestedDims(inner, (3, 2))(ids, vectors).numpy(), expected, rtol=1e-6)
