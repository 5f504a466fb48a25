"""Benchmark: parts of the default training step, each against the form it replaced.

    python bench/step_parts.py
    python bench/step_parts.py --publish   # also to bench/results/ (docs/performance.md quotes it)

- optimizer: one AdamW update of the default model's trainable weights (word embeddings
  frozen: 10.8M), tf_keras.optimizers.AdamW against trainer.modeling.optimization.AdamW;
- layer norm: tf-keras' LayerNormalization against trainer's LayerNorm (gradient written out);
- GELU: a feed-forward input projection and its GELU under mixed_bfloat16, forward and
  gradient, for a batch of 32 x 32 tokens: GELU in bfloat16 against trainer's float32 GELU,
  and two forms that were not kept (tanh approximation, XLA-compiled GELU);
- forms that were not kept for the other parts: the projection as a 2-D MatMul instead of an
  einsum, layer norm through fused batch norm or XLA, and cheaper-looking dropout masks.

Each pair is timed alternately in this one process (5 rounds, median); the figure is CPU
milliseconds per call over all threads, which moves far less than wall time on a shared machine.
"""

import argparse
import os
import statistics
import sys
import time

import trainer

tf = trainer.import_tensorflow()
import tf_keras  # noqa: E402

from trainer.modeling import optimization  # noqa: E402
from trainer.modeling.encoders import layers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_publish_flag, printed, publish  # noqa: E402

HIDDEN, HEADS, INTERMEDIATE, LAYERS = 384, 12, 1536, 6


def trainable_shapes() -> list:
    """The default encoder's trained weights plus a 3-class head (word embeddings frozen)."""
    head = HIDDEN // HEADS
    layer = [(HIDDEN, HEADS, head), (HEADS, head)] * 3 + [
        (HEADS, head, HIDDEN),
        (HIDDEN,),
        (HIDDEN,),
        (HIDDEN,),
        (HIDDEN, INTERMEDIATE),
        (INTERMEDIATE,),
        (INTERMEDIATE, HIDDEN),
        (HIDDEN,),
        (HIDDEN,),
        (HIDDEN,),
    ]
    return [(512, HIDDEN), (2, HIDDEN), (HIDDEN,), (HIDDEN,)] + layer * LAYERS + [(HIDDEN, 3), (3,)]


def optimizer_step(optimizer_class):
    shapes = trainable_shapes()
    variables = [tf.Variable(tf.random.normal(s, stddev=0.02), name="kernel" if len(s) > 1 else "bias") for s in shapes]
    gradients = [tf.random.normal(s, stddev=0.01) for s in shapes]
    optimizer = optimizer_class(
        learning_rate=optimization.WarmupLinearDecay(1e-4, 100, 1000),
        weight_decay=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=optimization.NO_DECAY)
    return tf.function(lambda: optimizer.apply_gradients(zip(gradients, variables)))


def gelu_block(gelu):
    kernel = tf.Variable(tf.random.normal([HIDDEN, INTERMEDIATE], stddev=0.02))
    inputs = tf.cast(tf.random.normal([32, 32, HIDDEN]), tf.bfloat16)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            inner = tf.einsum("abc,cd->abd", inputs, tf.cast(kernel, tf.bfloat16))
            loss = tf.reduce_sum(tf.cast(gelu(inner), tf.float32) ** 2)
        return tape.gradient(loss, [inputs, kernel])

    return step


def projection_as_matmul():
    kernel = tf.Variable(tf.random.normal([HIDDEN, INTERMEDIATE], stddev=0.02))
    inputs = tf.cast(tf.random.normal([32, 32, HIDDEN]), tf.bfloat16)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            inner = tf.matmul(tf.reshape(inputs, [-1, HIDDEN]), tf.cast(kernel, tf.bfloat16))
            loss = tf.reduce_sum(tf.cast(inner, tf.float32) ** 2)
        return tape.gradient(loss, [inputs, kernel])

    return step


def layer_norm_step(norm):
    inputs = tf.cast(tf.random.normal([32, 32, HIDDEN]), tf.bfloat16)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(tf.cast(norm(inputs), tf.float32) ** 2)
        return tape.gradient(loss, inputs)

    return step


def fused_batch_norm_layer_norm(layer):
    """tf-keras' fused layer-norm path, which raises epsilon to at least 1.001e-5."""

    def norm(x):
        rows = tf.reshape(tf.cast(x, tf.float32), [1, -1, HIDDEN, 1])
        ones, zeros = tf.ones(tf.shape(rows)[1:2]), tf.zeros(tf.shape(rows)[1:2])
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(rows, ones, zeros, epsilon=1.001e-5, data_format="NCHW")
        return tf.cast(tf.reshape(y, tf.shape(x)) * layer.gamma + layer.beta, x.dtype)

    return norm


def dropout_step(dropout):
    inputs = tf.cast(tf.random.normal([32, HEADS, 32, 32]), tf.bfloat16)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(tf.cast(dropout(inputs), tf.float32))
        return tape.gradient(loss, inputs)

    return step


def masked(keep, x, rate=0.1):
    return tf.where(keep, x * tf.cast(1 / (1 - rate), x.dtype), tf.zeros_like(x))


def compare(title: str, calls: dict, repeats: int = 10, rounds: int = 5) -> dict:
    for call in calls.values():
        call()  # traces
    cpu = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.process_time()
            for _ in range(repeats):
                call()
            cpu[name].append(1000 * (time.process_time() - start) / repeats)
    print(title)
    for name, values in cpu.items():
        print(
            f"  {name:48s} {statistics.median(values):7.1f} CPU ms  (rounds: {', '.join(f'{v:.1f}' for v in values)})"
        )
    return {title: cpu}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_publish_flag(parser)
    args = parser.parse_args(argv)
    with printed() as text:
        cpu_ms = compare(
            "optimizer: one update of 10.8M trained weights",
            {
                "tf_keras AdamW": optimizer_step(tf_keras.optimizers.AdamW),
                "trainer AdamW (ResourceApplyAdam)": optimizer_step(optimization.AdamW),
            },
        )
        # Everything after the optimizer runs as the default training step does, in bfloat16.
        tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
        cpu_ms |= gelus() | projections() | layer_norms() | dropouts()
    if args.publish:
        publish("step_parts", {"cpu_ms_per_call": cpu_ms}, text.getvalue())


def gelus() -> dict:
    return compare(
        "feed-forward projection + GELU, forward and gradient, 32 x 32 tokens, bfloat16",
        {
            "GELU in bfloat16": gelu_block(lambda x: tf_keras.activations.gelu(x, approximate=False)),
            "trainer GELU (float32)": gelu_block(lambda x: layers.gelu(x, approximate=False)),
            "GELU tanh approximation, bfloat16": gelu_block(lambda x: tf_keras.activations.gelu(x, approximate=True)),
            "GELU in bfloat16, XLA-compiled": gelu_block(
                tf.function(lambda x: tf_keras.activations.gelu(x, approximate=False), jit_compile=True)
            ),
        },
    )


def projections() -> dict:
    return compare(
        "feed-forward projection alone, forward and gradient",
        {"einsum (EinsumDense)": gelu_block(tf.identity), "2-D MatMul": projection_as_matmul()},
    )


def layer_norms() -> dict:
    layer = tf_keras.layers.LayerNormalization(epsilon=1e-12)
    layer.build([None, None, HIDDEN])
    ours = layers.LayerNorm(epsilon=1e-12)
    ours.build([None, None, HIDDEN])
    return compare(
        "layer norm, forward and gradient, 32 x 32 tokens, bfloat16",
        {
            "tf-keras LayerNormalization": layer_norm_step(layer),
            "trainer LayerNorm (gradient written out)": layer_norm_step(ours),
            "fused batch norm (epsilon 1e-5)": layer_norm_step(fused_batch_norm_layer_norm(layer)),
            "tf-keras LayerNormalization, XLA-compiled": layer_norm_step(tf.function(layer, jit_compile=True)),
        },
    )


def dropouts() -> dict:
    generator = tf.random.Generator.from_seed(1)
    return compare(
        "dropout 0.1 of [32, 12, 32, 32] attention probabilities, forward and gradient",
        {
            "tf-keras (tf.random.Generator, bfloat16 uniform)": dropout_step(
                lambda x: tf.nn.experimental.general_dropout(x, 0.1, generator.uniform)
            ),
            "float32 uniform": dropout_step(
                lambda x: masked(generator.uniform(tf.shape(x), dtype=tf.float32) >= 0.1, x)
            ),
            "16 random bits per element": dropout_step(
                lambda x: masked(
                    tf.bitwise.bitwise_and(generator.uniform_full_int(tf.shape(x), dtype=tf.int32), 0xFFFF) >= 6554, x
                )
            ),
            "legacy stateful tf.nn.dropout": dropout_step(lambda x: tf.nn.dropout(x, 0.1, seed=3)),
        },
        repeats=50,
    )


if __name__ == "__main__":
    main()
