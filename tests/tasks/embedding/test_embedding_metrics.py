"""Embeddings' numbers (trainer/tasks/embedding/metrics.py) against values computed by hand and
against the Keras loss the model trains with."""

import numpy as np
import tensorflow as tf
from scipy import stats

from trainer.tasks.embedding import metrics
from trainer.tasks.embedding.keras import CoSENTLoss


def test_pair_cosines_are_of_each_rows_two_sides_at_any_length():
    vectors = np.array([[[3.0, 0.0], [0.0, 2.0]], [[1.0, 1.0], [2.0, 2.0]], [[1.0, 0.0], [-5.0, 0.0]]])
    np.testing.assert_allclose(metrics.pair_cosines(vectors), [0.0, 1.0, -1.0], atol=1e-12)


def test_the_splits_loss_is_the_keras_loss_of_the_whole_split_in_one_batch():
    rng = np.random.default_rng(0)
    vectors, scores = rng.normal(size=(1100, 2, 8)), rng.uniform(0, 5, 1100)  # over two blocks of rows
    expected = CoSENTLoss()(tf.constant(scores, tf.float32), tf.constant(vectors, tf.float32)).numpy()
    np.testing.assert_allclose(metrics.cosent_loss(metrics.pair_cosines(vectors), scores), expected, rtol=1e-4)


def test_scored_pairs_report_the_correlations_of_cosine_with_the_score():
    rng = np.random.default_rng(1)
    vectors, scores = rng.normal(size=(50, 2, 4)), rng.uniform(0, 5, 50)
    cosines = metrics.pair_cosines(vectors)
    result = metrics.scored_pairs(vectors, scores)
    assert result["examples"] == 50
    np.testing.assert_allclose(result["spearman"], stats.spearmanr(cosines, scores)[0])
    np.testing.assert_allclose(result["pearson"], stats.pearsonr(cosines, scores)[0])


def test_pairs_whose_cosines_differ_by_a_float32_rounding_rank_as_ties_in_the_errors():
    """Two pairs of identical texts: a cosine of 1 give or take one rounding, which the CPU's
    vector width decides; errors.csv ranks them as it prints them, alike."""
    from trainer.inference.split_predictions import SplitPredictions
    from trainer.tasks.embedding.scored import ScoredPairs

    one_below, one_above = np.nextafter(np.float32(1), np.float32(0)), np.nextafter(np.float32(1), np.float32(2))
    for cosines in ([1.0, one_below, 0.5], [one_above, 1.0, 0.5]):
        pairs = SplitPredictions(["a", "b", "c"], np.array([4.0, 3.0, 1.0]), None, None, scores=np.array(cosines))
        gap, _, _ = ScoredPairs().error_measure(pairs, None)
        np.testing.assert_allclose(gap, [0.25, 0.25, 0.0])
