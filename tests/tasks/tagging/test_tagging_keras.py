"""Token classification's loss and metric (trainer/tasks/tagging/keras.py): both ignore the
tokens that carry no word's tag."""

import numpy as np
import tensorflow as tf

from trainer.tasks.tagging.keras import TagAccuracy, TagLoss


def test_the_loss_is_the_mean_over_tagged_words_only():
    logits = tf.constant([[[2.0, 0.0], [0.0, 1.0], [9.0, -9.0]]])
    tags = tf.constant([[0, 1, -1]])
    expected = np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(-1.0))])
    np.testing.assert_allclose(TagLoss()(tags, logits).numpy(), expected, rtol=1e-6)


def test_an_untagged_word_gets_no_gradient_and_an_untagged_sentence_costs_nothing():
    logits = tf.Variable([[[1.0, 2.0], [3.0, 4.0]], [[0.5, 0.5], [0.1, 0.2]]])
    with tf.GradientTape() as tape:
        loss = TagLoss(reduction="none")(tf.constant([[1, -1], [-1, -1]]), logits)
    gradient = tape.gradient(loss, logits).numpy()
    assert loss.numpy()[1] == 0.0
    assert not gradient[0, 1].any() and not gradient[1].any() and gradient[0, 0].any()


def test_tag_accuracy_counts_tagged_tokens_only():
    logits = tf.constant([[[2.0, 0.0], [0.0, 1.0], [9.0, -9.0]], [[0.0, 3.0], [1.0, 0.0], [0.0, 0.0]]])
    metric = TagAccuracy()
    metric.update_state(tf.constant([[0, 0, -1], [1, -1, -1]]), logits)
    assert metric.result().numpy() == np.float32(2 / 3)
