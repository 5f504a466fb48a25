"""Labelled texts' numbers (trainer/tasks/embedding/classes.py): each text's class voted by its
nearest other texts, and the supervised contrastive loss over a whole split."""

import numpy as np
import pytest
import tensorflow as tf

from trainer.tasks.embedding import classes
from trainer.tasks.embedding.keras import SupervisedContrastiveLoss


def at(*degrees):
    radians = np.radians(degrees)
    return np.stack([np.cos(radians), np.sin(radians)], axis=1)


def test_each_text_is_classified_by_its_nearest_others_never_itself():
    vectors, labels = at(0, 5, 10, 90, 95, 100), [0, 0, 0, 1, 1, 1]
    voted, agreeing = classes.neighbour_votes(vectors, labels, k=2)
    np.testing.assert_array_equal(voted, labels)
    np.testing.assert_array_equal(agreeing, [1.0] * 6)


def test_a_tie_goes_to_the_class_of_the_nearer_text():
    # Text 0's two nearest: 1 (class 1, at 10 degrees) then 2 (class 0, at 20).
    voted, agreeing = classes.neighbour_votes(at(0, 10, 20, 180), [0, 1, 0, 1], k=2)
    assert voted[0] == 1 and agreeing[0] == 0.5


def test_knn_accuracy_is_the_share_of_texts_their_neighbours_classify_right():
    # Six texts of each class; one of class 1 lies among class 0's: its 5 nearest outvote it.
    degrees = [0, 5, 10, 15, 20, 25, 90, 95, 100, 105, 110, 3]
    result = classes.labelled_texts(at(*degrees)[:, np.newaxis], [0] * 6 + [1] * 6)
    assert result["examples"] == 12 and result["knn_accuracy"] == pytest.approx(11 / 12)


def test_the_splits_loss_is_the_keras_loss_over_one_batch():
    vectors, labels = at(0, 40, 100, 170, 250), np.array([0, 0, 1, 1, 2])
    keras = SupervisedContrastiveLoss()(tf.constant(labels), tf.constant(vectors[:, np.newaxis], tf.float32))
    assert classes.contrastive_loss(vectors, labels) == pytest.approx(float(keras), rel=1e-5)


def test_each_text_has_its_nearest_of_its_class_and_of_another():
    # Text 0 (0 degrees): its class's nearest at 20, another's at 30; text 2 (class 1) has no
    # other text of its class.
    same, other = classes.nearest_by_class(at(0, 20, 30), [0, 0, 1])
    np.testing.assert_allclose(same[:2], np.cos(np.radians([20, 20])), atol=1e-6)
    np.testing.assert_allclose(other, np.cos(np.radians([30, 10, 10])), atol=1e-6)
    assert np.isnan(same[2])
