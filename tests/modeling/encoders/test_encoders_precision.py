"""Reduced precision and XLA reach the native encoder's compute, unlike a hub.KerasLayer's.

A TF-Hub SavedModel keeps the float32 graph it was traced with under any policy
(tensorflow/hub#466); these tests pin down that the native encoder does not.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from trainer.modeling.encoders import load_encoder
from trainer.modeling.encoders.layers import INPUT_KEYS, TransformerEncoderBlock

MATMUL_OPS = ("MatMul", "BatchMatMulV2", "Einsum")
INPUT_SPEC = {key: tf.TensorSpec([None, None], tf.int32) for key in INPUT_KEYS}


@pytest.fixture
def mixed_bfloat16():
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    tf_keras.mixed_precision.set_global_policy("float32")


def matmul_dtypes(function):
    """(op type, T) of every matmul-like op in a traced function, nested functions included."""
    graph_def = function.get_concrete_function(INPUT_SPEC).graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return [(n.op, tf.dtypes.as_dtype(n.attr["T"].type)) for n in nodes if n.op in MATMUL_OPS]


@pytest.fixture
def reduced_precision(request):
    tf_keras.mixed_precision.set_global_policy(f"mixed_{request.param}")
    yield request.param
    tf_keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("reduced_precision", ["bfloat16", "float16"], indirect=True)
def test_mixed_precision_runs_attention_and_feed_forward_in_the_reduced_dtype(tiny_encoder_dir, reduced_precision):
    network = load_encoder(tiny_encoder_dir, seq_length=16).network
    blocks = [layer for layer in network.layers if isinstance(layer, TransformerEncoderBlock)]
    sublayers = [
        sub
        for block in blocks
        for sub in (block.self_attention, block.intermediate, block.output_dense, block.self_attention_layer_norm)
    ]
    assert {layer.compute_dtype for layer in blocks + sublayers} == {reduced_precision}
    assert {variable.dtype for variable in network.weights} == {tf.float32}

    matmuls = matmul_dtypes(tf.function(lambda inputs: network(inputs, training=True)))
    # Per block: query, key, value, scores, context, attention output, intermediate, output.
    assert len(matmuls) >= 8 * len(blocks)
    assert {dtype for _, dtype in matmuls} == {tf.as_dtype(reduced_precision)}


def test_float32_policy_keeps_every_matmul_float32(tiny_encoder_dir):
    network = load_encoder(tiny_encoder_dir, seq_length=16).network
    matmuls = matmul_dtypes(tf.function(lambda inputs: network(inputs, training=True)))
    assert matmuls and {dtype for _, dtype in matmuls} == {tf.float32}


def test_xla_compiled_encoder_matches_graph_mode(tiny_encoder_dir):
    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    inputs = encoder.preprocessor(tf.constant(["i love this movie !", "it was not good"]))
    compiled = tf.function(lambda x: encoder.network(x), jit_compile=True)(inputs)
    graph = tf.function(lambda x: encoder.network(x))(inputs)
    for key in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(compiled[key], graph[key], atol=1e-5)


def layer_norm_outputs_and_gradients(layer, inputs):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs)
        loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * tf.range(1.0, 9.0))
    return [outputs, *tape.gradient(loss, [inputs, layer.gamma, layer.beta])]


def test_layer_norm_and_its_written_out_gradient_equal_tf_keras():
    from trainer.modeling.encoders.layers import LayerNorm

    inputs = tf.random.stateless_normal([3, 5, 8], seed=[1, 2]) * 4.0 + 1.5
    ours, reference = LayerNorm(epsilon=1e-12), tf_keras.layers.LayerNormalization(epsilon=1e-12)
    for layer in (ours, reference):
        layer.build(inputs.shape)
        layer.gamma.assign(tf.linspace(0.5, 2.0, 8))
        layer.beta.assign(tf.linspace(-1.0, 1.0, 8))
    for got, expected in zip(
        layer_norm_outputs_and_gradients(ours, inputs), layer_norm_outputs_and_gradients(reference, inputs)
    ):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_layer_norm_and_gelu_return_the_compute_dtype_under_mixed_bfloat16(mixed_bfloat16):
    from trainer.modeling.encoders.layers import LayerNorm, gelu

    layer = LayerNorm(epsilon=1e-12)
    inputs = tf.cast(tf.random.stateless_normal([2, 3, 8], seed=[3, 4]), tf.bfloat16)
    assert layer(inputs).dtype == tf.bfloat16 and layer.gamma.dtype == tf.float32
    assert gelu(inputs, approximate=False).dtype == tf.bfloat16
    np.testing.assert_allclose(
        gelu(inputs, approximate=False).numpy().astype(np.float32),
        tf.nn.gelu(tf.cast(inputs, tf.float32)).numpy(),
        rtol=1e-2,
        atol=1e-2,
    )
