"""Token classification's head and loss (trainer/tasks/tagging/keras.py): logits read at each
word's first piece, and a loss that ignores words without a tag."""
import numpy as np
import tensorflow as tf

from trainer.tasks.tagging.keras import TagLoss, WordLogits


def test_each_words_logits_come_from_its_first_piece():
    layer = WordLogits(3)
    sequence = tf.random.stateless_normal([2, 6, 4], seed=[1, 2])
    positions = tf.constant([[1, 3, -1], [2, 4, 5]])
    logits = layer(sequence, positions).numpy()
    direct = layer.dense(tf.gather(sequence[1], [2, 4, 5])).numpy()
    assert logits.shape == (2, 3, 3) and logits.dtype == np.float32
    np.testing.assert_allclose(logits[1], direct, rtol=1e-6)
    np.testing.assert_allclose(logits[0, 1], layer.dense(sequence[0, 3:4]).numpy()[0], rtol=1e-6)


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
