"""The converted graph fused offline, as shipped in a copy: ONNX Runtime's transformer
optimizer at opt_level 0 (its fusions only: attention, GELU with its bias, LayerNormalization),
with two passes of ours around it. No session-level optimization is saved (ORT_ENABLE_ALL
rewrites are specific to the CPU that made them, ORT warns): ONNX Runtime applies its own when
it loads the file.

Before: `sublayer_first`, so that the attention fusion finds our residual blocks. After:
`einsums_to_matmuls`, so that every dense layer is a MatMul, the op int8 quantization
quantizes. SkipLayerNormalization is not fused: ORT 1.32's CPU kernel measured about 5x slower
than the Add and LayerNormalization it replaces (design study of issue 66; the runtime also
tells ORT not to fuse it at load).

No TensorFlow here: numpy, onnx and onnxruntime's transformer tools (which need sympy).
"""

import contextlib
import io
import logging
import math

import numpy as np

# The Keras attention's output dense, kernel [heads, head size, hidden]: below the residual Add
# that sublayer_first swaps.
ATTENTION_OUTPUT = "abcd,cde->abe"


def fuse(model, num_heads: int, hidden_size: int, attention: bool = True) -> tuple:
    """(the fused model, what was fused: {op: count}, or the one line saying why nothing was).
    The attention fuses for BERT-shaped blocks (BERT, RoBERTa, XLM-R, DistilBERT); other families
    keep their attention as it was converted, and their dense layers become MatMuls either way.
    A graph the optimizer cannot fuse (it refuses ELECTRA's, "Graph is not a DAG") is kept as
    converted, with its dense layers as MatMuls.

    `attention=False` for a model whose attention mask is not the graph's input (--long-texts
    windows reshapes it first): there ORT 1.32's bert_tf fusion inserts an opset-11 Squeeze of
    the mask Unsqueeze's axes (onnx_model_bert_tf.py, "Squeeze_3d_to_2d_mask"), an invalid graph."""
    import onnx
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    sublayer_first(model)
    options = FusionOptions("bert")
    options.enable_skip_layer_norm = options.enable_bias_skip_layer_norm = False
    options.enable_attention = attention
    unfused = onnx.ModelProto()
    unfused.CopyFrom(model)
    try:
        with quietly():
            optimized = optimizer.optimize_model(
                model,
                model_type="bert_tf",
                num_heads=num_heads,
                hidden_size=hidden_size,
                opt_level=0,
                optimization_options=options,
            )
        optimized.topological_sort()
        fused, model = optimized.get_fused_operator_statistics(), optimized.model
        fused = {name: count for name, count in fused.items() if count}
    except Exception as error:  # noqa: BLE001  the unfused graph computes the same
        fused, model = f"not fused: {(str(error).strip().splitlines() or [''])[0]}", unfused
    einsums_to_matmuls(model)
    prune(model)
    _import_contrib_domain(model)
    return model, fused


def _import_contrib_domain(model) -> None:
    """The fused ops (Attention, BiasGelu) are com.microsoft's, whose opset the optimizer
    imports only when it saves a file itself."""
    if any(node.domain == "com.microsoft" for node in model.graph.node) and not any(
        opset.domain == "com.microsoft" for opset in model.opset_import
    ):
        model.opset_import.add(domain="com.microsoft", version=1)


@contextlib.contextmanager
def quietly():
    """ONNX Runtime's transformer optimizer and quantizer, while they run: their loggers (named
    after their modules, some imported as top-level modules) warn about missing shapes and
    "pre-processing", and the optimizer prints a failed shape inference to stdout
    (onnx_model.py). The export logs its own line of what came out."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


def _equation(node) -> str:
    return next((a.s.decode() for a in node.attribute if a.name == "equation"), "")


def sublayer_first(model) -> int:
    """Swaps the operands of each residual Add whose second operand is the attention's output
    (its output dense: an Einsum ATTENTION_OUTPUT plus bias), so that it comes first; returns
    how many. The bert_tf attention fusion looks for the attention below input 0 of the residual
    Add; our blocks write `inputs + attended`. Addition commutes: the outputs are unchanged."""
    producers = {out: node for node in model.graph.node for out in node.output}
    swapped = 0
    for node in model.graph.node:
        if node.op_type != "Add" or len(node.input) != 2:
            continue
        bias_add = producers.get(node.input[1])
        dense = bias_add is not None and bias_add.op_type == "Add" and producers.get(bias_add.input[0])
        if dense and dense.op_type == "Einsum" and _equation(dense) == ATTENTION_OUTPUT:
            node.input[0], node.input[1] = node.input[1], node.input[0]
            swapped += 1
    return swapped


def _dense_einsum(equation: str):
    """(batch, contracted, free) letters of an einsum `x,w->y` that is a dense layer: x is
    batch + contracted, w is contracted + free, y is batch + free; else None."""
    inputs, _, output = equation.replace(" ", "").partition("->")
    x, _, w = inputs.partition(",")
    contracted = "".join(letter for letter in x if letter in w and letter not in output)
    if not contracted or not w.startswith(contracted) or not x.endswith(contracted):
        return None
    batch, free = x[: -len(contracted)], w[len(contracted) :]
    return (batch, contracted, free) if output == batch + free else None


def einsums_to_matmuls(model) -> int:
    """Rewrites each Einsum of an activation and a constant kernel that is a dense layer (Keras'
    EinsumDense: x [.., contracted] by a kernel [contracted, free]) as Reshape -> MatMul by the
    kernel as a matrix -> Reshape; returns how many. ONNX Runtime's dynamic quantization
    quantizes MatMul, not Einsum. The Einsums of two activations (attention scores) stay."""
    from onnx import helper, numpy_helper

    initializers = {init.name: init for init in model.graph.initializer}
    nodes, rewritten = [], 0
    for node in model.graph.node:
        letters = _dense_einsum(_equation(node)) if node.op_type == "Einsum" else None
        if letters is None or node.input[1] not in initializers:
            nodes.append(node)
            continue
        batch, contracted, free = letters
        kernel = numpy_helper.to_array(initializers[node.input[1]])
        inner = math.prod(kernel.shape[: len(contracted)])
        name = node.name or node.output[0]
        matrix = numpy_helper.from_array(kernel.reshape(inner, -1), f"{name}/matrix")
        model.graph.initializer.append(matrix)
        x = node.input[0]
        if len(contracted) > 1:
            nodes.append(_reshape(model, x, f"{name}/flat", [0] * len(batch) + [inner]))
            x = f"{name}/flat"
        if len(free) > 1:
            nodes.append(helper.make_node("MatMul", [x, matrix.name], [f"{name}/product"], name=f"{name}/matmul"))
            nodes.append(
                _reshape(
                    model, f"{name}/product", node.output[0], [0] * len(batch) + list(kernel.shape[len(contracted) :])
                )
            )
        else:
            nodes.append(helper.make_node("MatMul", [x, matrix.name], list(node.output), name=f"{name}/matmul"))
        rewritten += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return rewritten


def _reshape(model, source: str, target: str, shape: list):
    """A Reshape node (its shape an initializer; 0 keeps that dimension)."""
    from onnx import helper, numpy_helper

    model.graph.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), f"{target}/shape"))
    return helper.make_node("Reshape", [source, f"{target}/shape"], [target], name=f"{target}/reshape")


def prune(model) -> None:
    """Drops the nodes and initializers no output depends on (the kernels the rewrites
    replaced)."""
    needed = {output.name for output in model.graph.output}
    kept = []
    for node in reversed(list(model.graph.node)):
        if any(output in needed for output in node.output):
            kept.append(node)
            needed.update(node.input)
    del model.graph.node[:]
    model.graph.node.extend(reversed(kept))
    used = [init for init in model.graph.initializer if init.name in needed]
    del model.graph.initializer[:]
    model.graph.initializer.extend(used)
