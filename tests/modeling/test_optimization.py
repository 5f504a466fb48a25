"""The fine-tuning optimizer: AdamW with a learning rate per variable, updated by one fused kernel."""

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.modeling import optimization


def trained_weights(optimizer_class, steps=20, peak=1e-2, scales=()):
    """A kernel (decayed), a bias (not decayed) and an embedding table (sparse gradient).

    The table's rows are distinct: for a repeated row Keras' sparse path sums the squares of its
    gradients, where Adam on the dense gradient (ours) squares their sum."""
    kernel = tf.Variable(tf.random.stateless_normal([6, 4], seed=[1, 2]), name="kernel")
    bias = tf.Variable(tf.random.stateless_normal([4], seed=[3, 4]), name="bias")
    table = tf.Variable(tf.random.stateless_normal([5, 4], seed=[5, 6]), name="table")
    optimizer = optimizer_class(
        learning_rate=optimization.WarmupLinearDecay(peak, 3, steps),
        weight_decay=0.1,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=optimization.NO_DECAY)
    variables = [kernel, bias, table]
    if scales:
        optimizer.scale_learning_rates(list(zip(variables, scales)))

    @tf.function
    def step(scale):
        with tf.GradientTape() as tape:
            rows = tf.gather(table, [0, 2, 4])
            loss = tf.reduce_sum(tf.sin(kernel * scale)) + tf.reduce_sum(bias**3) + tf.reduce_sum(rows**2)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for index in range(steps):
        step(tf.constant(1.0 + index / steps))
    return [v.numpy() for v in variables + list(optimizer.variables)]


def test_adamw_computes_the_same_update_and_slots_as_tf_keras():
    ours, keras = trained_weights(optimization.AdamW), trained_weights(tf_keras.optimizers.AdamW)
    assert len(ours) == len(keras)
    for got, expected in zip(ours, keras):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_scaled_variables_train_as_at_that_learning_rate_weight_decay_included():
    scaled = trained_weights(optimization.AdamW, scales=(0.5, 0.5, 0.5))
    at_half = trained_weights(tf_keras.optimizers.AdamW, peak=0.5e-2)
    for got, expected in zip(scaled, at_half):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_layer_decay_scales_each_layer_below_the_top_by_one_more_factor():
    from trainer.modeling.encoders.layers import EncoderConfig
    from trainer.modeling.encoders.models import bert

    network = bert.build(EncoderConfig(vocab_size=30, hidden_size=8, num_layers=2, num_heads=2, intermediate_size=16))
    scales = {v.name: scale for v, scale in optimization.layer_rate_scales(network.weights, 0.5)}
    assert all(s == 0.5 for name, s in scales.items() if "transformer/layer_1/" in name)
    assert all(s == 0.25 for name, s in scales.items() if "transformer/layer_0/" in name)
    embeddings = [name for name in scales if "embedding" in name]
    assert embeddings and all(scales[name] == 0.125 for name in embeddings)
    assert not [name for name in scales if "pooler" in name]


def test_no_layer_decay_leaves_every_rate_alone():
    variable = tf.Variable(tf.zeros([2]), name="transformer/layer_0/output/kernel")
    assert optimization.layer_rate_scales([variable], 1.0) == []
