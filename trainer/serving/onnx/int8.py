"""The int8 ONNX copy: the fused float32 graph through ONNX Runtime's dynamic quantization, with
the nodes that move its decisions most kept float when every node in int8 decides too
differently.

Dynamic quantization stores each dense kernel (MatMul, the fused Attention's QKV) in int8 per
output channel and quantizes its input on the fly, one scale for the whole tensor (uint8).
That last part is what costs agreement: LiteRT's int8 copy scales each row instead. The design
study of issue 66 measured 98.6-99.0% of labels agreeing with float32 on an SST-2 model, below
the 99% every copy must reach (trainer.serving.agreement). The embeddings' Gather stays float:
quantizing the table (one scale for all of it) cost 0.6 points of agreement there for no speed.

Smoothing (`smoothed`), tried when every node in int8 is refused: SmoothQuant's migration
(Xiao et al. 2023, arXiv:2211.10438): each candidate's input is divided channel by channel by s
and its kernel's rows multiplied by s, the same function in float, with s = max|x|^alpha /
max|w|^(1-alpha) (alpha: SMOOTHING) over the ranking rows. An encoder's dense inputs have a few
channels many times larger than the rest, which set the input's one scale; divided down, the
other channels keep their precision. On bench/onnx_copies.py's SST-2 model (2026-12-04, a
2-core Xeon with AMX) every node in int8 agreed on 98.60% of validation labels, smoothed on
99.30%: no node kept float. The design study (issue 66, the quickstart's model on 4,000 SST-2
texts it never saw, every node int8) chose alpha: the probabilities' mean difference from
float32 was 0.0188 unsmoothed, 0.0334 at 0.5, 0.0121 at 0.7, 0.0101 at 0.8, 0.0104 at 0.9,
0.0133 at 1.0.

The float fallback (`keep_float`): each candidate node is quantized alone and scored by how far
the outputs move on ranking rows (training rows: not the check's); the most sensitive are then
kept float, more each round, until the check passes on the validation rows or half the nodes
are float. Scoring each node alone runs one session of an emulating graph (`emulator`): each
candidate computes on its int8 weights and quantized input when its gate is 1, so one graph
scores them all.

No TensorFlow here; the callers pass the features (the SavedModel's own tokens) and the check.
"""

import collections
import os
import tempfile
import time

import numpy as np

from trainer.serving.onnx import fusion, runtime
from trainer.serving.onnx.runtime import ROWS_PER_RUN

OP_TYPES = ("MatMul", "Attention")
GATES = "int8_gates"
# The emulator computes its gated kernels at every run: a few large runs, not many small.
EMULATOR_ROWS_PER_RUN = 128
# SmoothQuant's migration strength (the docstring's design study).
SMOOTHING = 0.8


def quantize(model, keep_float=()):
    """`model` with every candidate node in int8 but those named in `keep_float`."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp, fusion.quietly():
        path = os.path.join(tmp, "int8.onnx")
        # DefaultTensorType: ONNX shape inference knows no com.microsoft op, so without it the
        # quantizer cannot tell the type of the tensors after a fused Attention ("Unable to find
        # data type for weight_name=...").
        quantize_dynamic(
            model,
            path,
            op_types_to_quantize=list(OP_TYPES),
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=list(keep_float),
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return onnx.load(path)


def candidates(model) -> list:
    """The nodes `quantize` puts in int8, in graph order: MatMuls by a constant kernel, fused
    Attentions."""
    constants = {init.name for init in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if (node.op_type == "MatMul" and node.input[1] in constants) or node.op_type == "Attention"
    ]


def emulator(model, quantized):
    """`model` with a float input GATES [candidates]: where a candidate's gate is 1 it computes
    as in `quantized` (its kernel as the int8 one dequantized, its input through
    DynamicQuantizeLinear and back, as ONNX Runtime's int8 kernels see it); 0 leaves it float."""
    import onnx
    from onnx import helper, numpy_helper

    emulated = onnx.ModelProto()
    emulated.CopyFrom(model)
    graph = emulated.graph
    stored = {init.name: init for init in quantized.graph.initializer}
    kernels = {init.name: init for init in graph.initializer}
    names = candidates(model)
    graph.input.append(helper.make_tensor_value_info(GATES, onnx.TensorProto.FLOAT, [len(names)]))
    nodes = []
    for node in graph.node:
        if node.name in names:
            index, kernel = names.index(node.name), node.input[1]
            int8 = _dequantized(stored, kernels[kernel].name)
            gate = f"{node.name}/gate"
            graph.initializer.extend(
                [
                    numpy_helper.from_array(np.array([index], np.int64), f"{gate}/index"),
                    numpy_helper.from_array(int8 - numpy_helper.to_array(kernels[kernel]), f"{gate}/kernel_change"),
                ]
            )
            nodes += [
                helper.make_node("Gather", [GATES, f"{gate}/index"], [gate]),
                *_gated(gate, node.input[0], f"{gate}/input"),
                helper.make_node("Mul", [gate, f"{gate}/kernel_change"], [f"{gate}/kernel_moved"]),
                helper.make_node("Add", [kernel, f"{gate}/kernel_moved"], [f"{gate}/kernel"]),
            ]
            node.input[0], node.input[1] = f"{gate}/input", f"{gate}/kernel"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return emulated


def smoothed(model, features: dict, ladder):
    """`model` with each candidate's input divided per channel by s (a Mul before it) and its
    kernel's rows multiplied by s: the same function in float, s from `input_ranges` on
    `features` (see the module's docstring)."""
    import onnx
    from onnx import helper, numpy_helper

    ranges = input_ranges(model, features, ladder)
    smooth = onnx.ModelProto()
    smooth.CopyFrom(model)
    graph = smooth.graph
    kernels = {init.name: init for init in graph.initializer}
    uses = collections.Counter(name for node in graph.node for name in node.input)
    # A kernel another node reads too stays as it is: scaled, it would change that node's function
    kernel_of = {node.name: node.input[1] for node in graph.node if len(node.input) > 1}
    names, nodes = {name for name in candidates(model) if uses[kernel_of[name]] == 1}, []
    for node in graph.node:
        if node.name in names:
            kernel = numpy_helper.to_array(kernels[node.input[1]])
            wide = np.maximum(np.abs(kernel).max(axis=1), 1e-5) ** (1 - SMOOTHING)
            scale = np.clip(np.maximum(ranges[node.input[0]], 1e-5) ** SMOOTHING / wide, 1e-3, 1e3).astype(np.float32)
            kernels[node.input[1]].CopyFrom(numpy_helper.from_array(kernel * scale[:, None], node.input[1]))
            inverse = f"{node.name}/smoothing"
            graph.initializer.append(numpy_helper.from_array(1 / scale, inverse))
            nodes.append(helper.make_node("Mul", [node.input[0], inverse], [f"{inverse}/input"], name=inverse))
            node.input[0] = f"{inverse}/input"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return smooth


def input_ranges(model, features: dict, ladder) -> dict:
    """{tensor: its largest absolute value per channel} of each candidate's input, over `features`."""
    import onnx
    from onnx import helper

    from trainer.inference import loaded_model

    nodes = {node.name: node for node in model.graph.node}
    inputs = sorted({nodes[name].input[0] for name in candidates(model)})
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in inputs)
    probed = session(probe)
    ranges = {}
    for _, batch in loaded_model.token_batches(features, EMULATOR_ROWS_PER_RUN, ladder):
        for name, value in zip(inputs, probed.run(inputs, batch)):
            found = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            ranges[name] = found if name not in ranges else np.maximum(ranges[name], found)
    return ranges


def _dequantized(stored: dict, kernel: str) -> np.ndarray:
    """A kernel as the quantized graph holds it (`<name>_quantized`, per-channel `_scale` and
    `_zero_point`; the fused Attention's under its own names), back in float."""
    from onnx import numpy_helper

    value, scale, zero = (
        numpy_helper.to_array(stored[f"{kernel}_{part}"]) for part in ("quantized", "scale", "zero_point")
    )
    return ((value.astype(np.float32) - zero.astype(np.float32)) * scale).astype(np.float32)


def _gated(gate: str, source: str, target: str) -> list:
    """Nodes of target = source + gate * (dequantize(quantize(source)) - source)."""
    from onnx import helper

    return [
        helper.make_node("DynamicQuantizeLinear", [source], [f"{target}/q", f"{target}/scale", f"{target}/zero"]),
        helper.make_node("DequantizeLinear", [f"{target}/q", f"{target}/scale", f"{target}/zero"], [f"{target}/int8"]),
        helper.make_node("Sub", [f"{target}/int8", source], [f"{target}/change"]),
        helper.make_node("Mul", [gate, f"{target}/change"], [f"{target}/moved"]),
        helper.make_node("Add", [source, f"{target}/moved"], [target]),
    ]


def session(model):
    """An ONNX Runtime session of a model in memory, as the runtime makes them (one thread)."""
    return runtime.session(model.SerializeToString())


def float_outputs(session, features: dict, ladder, rows_per_run: int = ROWS_PER_RUN, **inputs) -> np.ndarray:
    """Every float output of `session` over `features`, in row order, side by side [N, K]
    (strings and integers are decisions of these); each run cut to its rows' ladder length."""
    from trainer.inference import loaded_model

    names = [o.name for o in session.get_outputs() if o.type == "tensor(float)"]
    collected = None
    for rows, batch in loaded_model.token_batches(features, rows_per_run, ladder):
        values = np.concatenate([v.reshape(len(rows), -1) for v in session.run(names, {**batch, **inputs})], 1)
        collected = (
            np.zeros((len(features["input_mask"]), values.shape[1]), np.float32) if collected is None else collected
        )
        collected[rows] = values
    return collected


def sensitivity(model, quantized, features: dict, ladder) -> dict:
    """{candidate: the mean absolute change of the float outputs on `features` when it alone is
    int8}."""
    names = candidates(model)
    emulated = session(emulator(model, quantized))
    gates = np.zeros(len(names), np.float32)
    reference = float_outputs(emulated, features, ladder, EMULATOR_ROWS_PER_RUN, **{GATES: gates})
    scores = {}
    for index, name in enumerate(names):
        gates[:] = 0
        gates[index] = 1
        moved = float_outputs(emulated, features, ladder, EMULATOR_ROWS_PER_RUN, **{GATES: gates})
        scores[name] = float(np.abs(moved - reference).mean())
    return scores


def keep_float(model, quantized, ranking: dict, ladder, check) -> tuple:
    """(the int8 model, the nodes kept float, the check's figures, what the search tried): the
    fewest of the most sensitive nodes (`sensitivity` on the `ranking` features) kept float for
    `check(model) -> figures` to pass (its "passed"), trying 1, 2, 3, 4, 6, 8, ... up to half of
    the candidates; the last tried when none passes. `quantized`: every candidate int8."""
    scores = sensitivity(model, quantized, ranking, ladder)
    order = sorted(scores, key=scores.get, reverse=True)
    tried = []
    for count in _counts(len(order) // 2):
        started = time.perf_counter()
        candidate = quantize(model, order[:count])
        figures = check(candidate)
        tried.append(
            {
                "float_nodes": count,
                "label_agreement": figures.get("label_agreement"),
                "seconds": time.perf_counter() - started,
            }
        )
        if figures["passed"]:
            break
    return candidate, order[:count], figures, tried


def _counts(most: int):
    """1, 2, 3, 4, 6, 8, 12, 16, ... (each about a third to a half more), up to `most`."""
    count = 1
    while count < most:
        yield count
        count = count + 1 if count < 4 else count + count // 2
    yield max(most, 1)
