"""The float32 ONNX graph of a sentence model: token features in, the SavedModel's
`predict_tokens` outputs out (the task's head included: temperature, thresholds, label names);
of a tagger, its network alone: token features in, every token's logits out (`convert_network`).

The classifier is built again in float32 and given the export's weights, as the int8 and
bfloat16 copies are (serving/quantize.classifier_with), and traced with its serving module's
`outputs` after it by tf2onnx at opset 17. Two things differ from a plain tf2onnx run, each so
that ONNX Runtime's transformer optimizer can fuse the graph afterwards (fusion.py; the design
study of issue 66 measured each):
- `onnx_forms`: while the classifier is built and traced, three functions of the encoder layers
  take the form the optimizer's patterns match (the same math);
- `fusable_optimizers`: two of tf2onnx's graph optimizers are left out (and the copies of the
  graph the others leave behind are freed as they go: `_collected`).

A multi-label model's `labels` joins the chosen label names with a separator; opset 17 has no
string concatenation (StringConcat is opset 20, beyond tf2onnx 1.17), so that output is built from
a table of every set of labels instead of converted (`joined_output`), for at most
MAX_JOINED_LABELS labels; past that the graph returns the 0/1 `predicted` alone and the runtime
joins the names (`joined_outside`, runtime.joined_labels).
"""

import contextlib
import gc

import numpy as np
import tensorflow as tf

from trainer.modeling import heads
from trainer.modeling.encoders import layers
from trainer.modeling.encoders.layers import INPUT_KEYS

OPSET = 17
# tf2onnx's einsum_optimizer rewrites every Keras einsum into Reshape/Gemm/ReduceProd chains
# (the attention fusion matches the Einsum nodes themselves, as tf_keras' MultiHeadAttention
# writes them; quantize_dynamic quantizes no Gemm), and global_pool_optimizer turns a
# LayerNorm's ReduceMean over the last axis into GlobalAveragePool, which no LayerNorm fusion
# matches.
UNFUSABLE_OPTIMIZERS = ("einsum_optimizer", "global_pool_optimizer")
# A table of 2**16 joined label sets is a few MB in the graph; 2**17 and beyond grow past the
# model's own size for a small encoder (past it, the runtime joins: joined_outside).
MAX_JOINED_LABELS = 16
# A tagger's graph's one output: every token's logits [windows, max_seq_length, tags].
TAGGER_OUTPUT = "logits"


def _erf_gelu(x, approximate: bool):
    """Exact GELU as x * ((1 + erf(x * 0.70710678)) * 0.5), the node order of ORT's GELU fusion
    (its "pattern 3"): tf.nn.gelu's 0.5 * x * erfc(-x / sqrt2) has no ONNX Erfc (tf2onnx 1.17 has
    no handler), and the other orders do not fuse. The tanh form converts and fuses as it is."""
    y = tf.cast(x, tf.float32)
    if approximate:
        return tf.cast(tf.nn.gelu(y, approximate=True), x.dtype)
    return tf.cast(y * ((1.0 + tf.math.erf(y * 0.7071067811865476)) * 0.5), x.dtype)


def _integer_attention_mask(input_mask):
    """layers.attention_mask without its cast to bool: every consumer casts it to float (Keras'
    masked softmax: (1 - mask) * -1e9), and the attention fusion follows the mask from the input
    through Unsqueeze and Cast to float, which a Cast to bool in between breaks."""
    return tf.expand_dims(input_mask, 1)


def _divided_layer_norm(self, inputs):
    """layers.LayerNorm's forward as (x - mean) / sqrt(var + eps) * gamma + beta, the form ORT's
    LayerNormalization fusion matches (the package's multiplies by rsqrt, which none does).
    Inference only: no custom gradient."""
    x = tf.cast(inputs, tf.float32)
    centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.pow(centered, 2.0), axis=-1, keepdims=True)
    out = centered / tf.sqrt(variance + self.epsilon) * self.gamma
    return tf.cast(out + self.beta if self.center else out, self.compute_dtype)


@contextlib.contextmanager
def onnx_forms():
    """While a classifier is built and traced: GELU, the attention mask and LayerNorm in the
    forms ORT's fusion matches (the same math, as export.computing_in_float32 switches dtype
    policies for a trace). The mask is made when the network is built, so build it inside."""
    saved = layers.gelu, layers.attention_mask, layers.LayerNorm.call
    layers.gelu, layers.attention_mask = _erf_gelu, _integer_attention_mask
    layers.LayerNorm.call = _divided_layer_norm
    try:
        yield
    finally:
        layers.gelu, layers.attention_mask, layers.LayerNorm.call = saved


@contextlib.contextmanager
def fusable_optimizers():
    """tf2onnx without UNFUSABLE_OPTIMIZERS. tf2onnx.convert.from_function takes no list of
    optimizers and runs its module's table, so the two are out of the table for the call."""
    from tf2onnx import optimizer

    table = optimizer._optimizers  # tf2onnx 1.17: the OrderedDict optimize_graph runs
    saved = dict(table)
    for name in UNFUSABLE_OPTIMIZERS:
        table.pop(name, None)
    for name, factory in list(table.items()):
        table[name] = _collected(factory)
    try:
        yield
    finally:
        table.clear()
        table.update(saved)


def _collected(factory):
    """`factory`, which makes one of tf2onnx's optimizers, run after a garbage collection.
    tf2onnx 1.17's optimize_graph deep-copies the whole graph, weights and all, before each
    optimizer of each pass (tf2onnx/optimizer/__init__.py, to restore it should one fail); each
    copy replaced is held by reference cycles, which only the cyclic collector frees, and it ran
    too seldom: the default model's float32 export peaked at 6.8 GB, against 3.2 GB with this
    (and 2.1 GB for the LiteRT int8 copy's)."""

    def make():
        gc.collect()
        return factory()

    return make


def encoder_shape(classifier) -> tuple:
    """(heads, hidden size) of a classifier's encoder: what the attention fusion needs."""
    config = heads.encoder_layer(classifier).encoder_config
    return config.num_heads, config.hidden_size


def joined_outside(task, label_names) -> dict:
    """{output: {"from": the 0/1 output, "separator", "labels"}} of the task's joined outputs
    that the graph cannot hold (more than MAX_JOINED_LABELS labels): the runtime joins those
    itself (runtime.joined_labels), and onnx.json says so."""
    if len(label_names) <= MAX_JOINED_LABELS:
        return {}
    return {
        name: {"from": chosen, "separator": separator, "labels": [str(n) for n in label_names]}
        for name, (chosen, separator) in task.joined_outputs().items()
    }


def convert(classifier, module, task, label_names):
    """The ONNX graph (a ModelProto) of features -> `module.outputs` of `classifier`'s logits:
    the outputs of the SavedModel's predict_tokens, by name, in its order. Build `classifier`
    and call this inside `onnx_forms`."""
    joined = task.joined_outputs()
    outside = joined_outside(task, label_names)

    def forward(logits):
        return {name: value for name, value in module.outputs(logits).items() if name not in joined}

    proto, function = _traced(classifier, forward)
    _embed_captured_constants(proto, function.get_concrete_function())
    for name, (chosen, separator) in joined.items():
        if name not in outside:
            joined_output(proto, name, chosen, label_names, separator)
    _sort_outputs(proto)
    return proto


def convert_network(classifier):
    """The ONNX graph of features -> `logits`, the network alone: a tagger's copy, whose words
    and entities are read around the graph in numpy (tasks/tagging/onnx_copy.py; ONNX has no regex split or
    substring by code points). Build `classifier` and call this inside `onnx_forms`."""
    return _traced(classifier, lambda logits: {TAGGER_OUTPUT: logits})[0]


def _traced(classifier, outputs):
    """(the ONNX graph, the traced tf.function) of features -> `outputs(classifier's float32
    logits)`, a dict naming the graph's outputs, by tf2onnx at OPSET without
    UNFUSABLE_OPTIMIZERS."""
    import tf2onnx

    specs = [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_KEYS]

    def forward(*features):
        return outputs(tf.cast(classifier(dict(zip(INPUT_KEYS, features)), training=False), tf.float32))

    function = tf.function(forward, input_signature=specs)
    with fusable_optimizers():
        proto, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=OPSET)
    return proto, function


def _embed_captured_constants(proto, concrete) -> None:
    """tf2onnx freezes captured variables but leaves a captured constant (the module's label
    names, a string tensor) as an extra graph input named after its placeholder: each becomes an
    initializer holding its value."""
    from onnx import helper, numpy_helper

    values = {
        placeholder.name: value
        for placeholder, value in zip(concrete.graph.internal_captures, concrete.captured_inputs)
    }
    for graph_input in [i for i in proto.graph.input if i.name in values]:
        value = values[graph_input.name].numpy()
        if value.dtype.kind in "SO":
            tensor = helper.make_tensor(
                graph_input.name, helper.TensorProto.STRING, value.shape, [bytes(v) for v in value.reshape(-1)]
            )
        else:
            tensor = numpy_helper.from_array(value, graph_input.name)
        proto.graph.initializer.append(tensor)
        proto.graph.input.remove(graph_input)


def joined_output(proto, name: str, chosen: str, label_names, separator: str) -> None:
    """Adds output `name`: each row's label names where output `chosen` ([B, C] of 0/1) is 1,
    joined by `separator`, as tf.strings.reduce_join does: a row's bits read as a number index a
    table of the 2**C joined sets."""
    from onnx import TensorProto, helper, numpy_helper

    count = len(label_names)
    table = [separator.join(label_names[j] for j in range(count) if code >> j & 1).encode() for code in range(2**count)]
    prefix = f"{name}_joined"
    proto.graph.initializer.extend(
        [
            helper.make_tensor(f"{prefix}/table", TensorProto.STRING, [len(table)], table),
            numpy_helper.from_array(2 ** np.arange(count, dtype=np.int64), f"{prefix}/bits"),
            numpy_helper.from_array(np.array([1], np.int64), f"{prefix}/axis"),
        ]
    )
    proto.graph.node.extend(
        [
            helper.make_node("Cast", [chosen], [f"{prefix}/chosen"], to=TensorProto.INT64),
            helper.make_node("Mul", [f"{prefix}/chosen", f"{prefix}/bits"], [f"{prefix}/weighted"]),
            helper.make_node("ReduceSum", [f"{prefix}/weighted", f"{prefix}/axis"], [f"{prefix}/code"], keepdims=0),
            helper.make_node("Gather", [f"{prefix}/table", f"{prefix}/code"], [name], axis=0),
        ]
    )
    proto.graph.output.append(helper.make_tensor_value_info(name, TensorProto.STRING, [None]))


def _sort_outputs(proto) -> None:
    """Outputs in the order of the SavedModel's signature (its dict's keys, sorted)."""
    outputs = sorted(proto.graph.output, key=lambda output: output.name)
    del proto.graph.output[:]
    proto.graph.output.extend(outputs)
