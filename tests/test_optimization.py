"""The fine-tuning optimizer: AdamW whose dense updates run as one fused kernel."""
import numpy as np
import tensorflow as tf
import tf_keras

from trainer.modeling import optimization


def trained_weights(optimizer_class, steps=20):
    """A kernel (decayed), a bias (not decayed) and an embedding table (sparse gradient)."""
    kernel = tf.Variable(tf.random.stateless_normal([6, 4], seed=[1, 2]), name="kernel")
    bias = tf.Variable(tf.random.stateless_normal([4], seed=[3, 4]), name="bias")
    table = tf.Variable(tf.random.stateless_normal([5, 4], seed=[5, 6]), name="table")
    optimizer = optimizer_class(
        learning_rate=optimization.WarmupLinearDecay(1e-2, 3, steps), weight_decay=0.1,
        beta_1=0.9, beta_2=0.999, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=optimization.NO_DECAY)
    variables = [kernel, bias, table]

    @tf.function
    def step(scale):
        with tf.GradientTape() as tape:
            rows = tf.gather(table, [0, 2, 2])
            loss = tf.reduce_sum(tf.sin(kernel * scale)) + tf.reduce_sum(bias ** 3) \
                + tf.reduce_sum(rows ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for index in range(steps):
        step(tf.constant(1.0 + index / steps))
    return [v.numpy() for v in variables + list(optimizer.variables)]


def test_adamw_computes_the_same_update_and_slots_as_tf_keras():
    ours, keras = trained_weights(optimization.AdamW), trained_weights(tf_keras.optimizers.AdamW)
    assert len(ours) == len(keras)
    for got, expected in zip(ours, keras):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
