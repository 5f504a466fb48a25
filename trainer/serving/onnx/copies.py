"""The two ONNX copies of a run's model, each a (write(dir), load(dir)) pair that
trainer.serving.quantize.export_checked writes and checks, as it does the int8 and bfloat16
copies.

The float32 copy is the classifier and its head converted (convert.py) and fused (fusion.py);
the int8 copy is made from the float32 copy's folder (int8.py: its model.onnx quantized, its
tokenizer files as they are), so a run converts once. Each folder holds model.onnx, the
tokenizer's two files (tokenizer_files.py) and onnx.json, written last.

A tagger's export answers through its signature (no `predict_tokens`: its words and entities
are TensorFlow string ops), so its copy's graph is the network alone (convert.convert_network)
and its folder holds what its unit adds (a tagger's tagging.json: tasks/tagging/onnx_copy.py reads the
words and entities around it).
"""

import json
import os
import tempfile
from collections.abc import Callable, Sequence

from trainer import storage
from trainer.data import padding
from trainer.inference import loaded_model
from trainer.modeling import heads
from trainer.serving import agreement, export, quantize, variants
from trainer.serving.onnx import convert, fusion, int8, packing, runtime, tokenizer_files

MODEL, FACTS = runtime.MODEL, runtime.GRAPH_FACTS
# What the int8 copy's onnx.json takes from the float32 copy's: what the graph is asked and
# answers, not how it computes.
SHARED_FACTS = ("pair", "padded_lengths", "task_outputs", "joined")
# Training rows the int8 float fallback scores each node on (int8.sensitivity): a seeded
# sample, apart from the validation rows the copy is then checked on.
RANKING_ROWS = 128


def float32_copy(
    build: Callable[[], tuple], variables, reference, task, label_names: Sequence[str], max_seq_length: int, pair: bool
) -> tuple:
    """((write, load) of the float32 copy, what was fused: {op: count} or why nothing) of the
    classifier `build()` makes, given `variables` (the trained model's or the export's), with
    the head of the float32 export `reference` (its temperature and decisions); of a tagger,
    its network alone, with tagging.json."""
    is_tagger = not loaded_model.tokenizes(reference)  # it answers through its signature
    with convert.onnx_forms():
        preprocessor, built = quantize.classifier_with(build, variables, "float32")
        classifier = task.unit.served(built)
        if is_tagger:
            converted = convert.convert_network(classifier)
        else:
            module = quantize.module_like(reference, preprocessor, built, task, label_names, max_seq_length, pair)
            converted = convert.convert(classifier, module, task, label_names)
    fused, what = fusion.fuse(converted, *convert.encoder_shape(classifier), attention=not heads.windowed(classifier))
    files = {
        **tokenizer_files.files(preprocessor, export.saved_long_texts(reference), pair),
        **task.unit.onnx_files(preprocessor, label_names, reference),
    }
    if is_tagger:
        shared = {
            "padded_lengths": list(padding.padded_lengths(max_seq_length)),
            "task_outputs": sorted(loaded_model.predict_outputs(reference, [""], 1)),
        }
    else:
        outside = convert.joined_outside(task, label_names)
        shared = {
            "padded_lengths": loaded_model.ladder_of(reference),
            "joined": outside,
            "task_outputs": sorted([output.name for output in fused.graph.output] + list(outside)),
        }
    return folder(fused, files, reference, task, "float32", {"pair": pair, **shared}), what


def int8_copy(
    model_dir: str, reference, task, check_rows: dict, ranking_texts: Callable[[], tuple], batch_size: int
) -> tuple:
    """((write, load) of the int8 copy, the nodes kept float, the log's line on what was tried
    or None) of the float32 copy in MODEL_DIR/onnx: every node int8 when that passes the check
    on `check_rows` ({texts, pairs, labels, label_names}, as export_checked compares them); else
    the graph smoothed on `ranking_texts()` ((texts, pairs) of training rows: int8.smoothed),
    every node int8; else int8.keep_float's model of the smoothed graph, its sensitivity ranked
    on those rows."""
    import onnx

    source = variants.variant_dir(model_dir, "onnx")
    model = onnx.load_from_string(storage.read_bytes(storage.join(source, MODEL)))
    files = {
        name: storage.read_bytes(storage.join(source, name))
        for name in (packing.TOKENIZER, packing.PACKING, *task.unit.onnx_sidecars)
    }
    source_facts = json.loads(storage.read_text(storage.join(source, FACTS)))
    shared = {key: source_facts[key] for key in SHARED_FACTS if key in source_facts}  # "joined": since 2026-12
    check = _checker(
        reference, task, check_rows, batch_size, lambda graph: folder(graph, files, reference, task, "int8", shared)
    )
    every = int8.quantize(model)
    figures = check(every)
    if figures["passed"]:
        return folder(every, files, reference, task, "int8", shared), [], None
    # The graph's inputs alone: a tagger's `tokenize` gives its words' features too; a task
    # comparing two texts ranks on the first texts (its graph takes one)
    texts, pairs = ranking_texts()
    rows = (texts,) if task.compares_pairs else (texts, pairs)
    tokens = loaded_model.tokenize(reference, *rows)
    ranking = {name: value for name, value in tokens.items() if name in packing.FEATURES}
    smooth = int8.smoothed(model, ranking, shared["padded_lengths"])
    every_smoothed = int8.quantize(smooth)
    smoothed_figures = check(every_smoothed)
    if smoothed_figures["passed"]:
        line = _smoothed_line(figures, smoothed_figures)
        return folder(every_smoothed, files, reference, task, "int8", shared), [], line
    chosen, kept, found, tried = int8.keep_float(smooth, every_smoothed, ranking, shared["padded_lengths"], check)
    line = _searched(figures, smoothed_figures, found, len(kept), len(int8.candidates(model)), tried)
    return folder(chosen, files, reference, task, "int8", shared, kept), kept, line


def fusion_words(fused) -> str:
    """fusion.fuse's account of what it fused, in the log's words."""
    if isinstance(fused, str):
        return fused
    return "fused " + ", ".join(f"{op} {count}" for op, count in fused.items()) if fused else "nothing fused"


def folder(model, files: dict, reference, task, precision: str, shared: dict, float_nodes=()) -> tuple:
    """(write(dir), load(dir)) of a copy's folder: `model`, the `files` beside it ({name:
    bytes}: the tokenizer's, a tagger's tagging.json) and onnx.json, written last: its presence
    marks the copy complete. `shared`: its SHARED_FACTS."""
    contents = {
        MODEL: model.SerializeToString(),
        **files,
        FACTS: json.dumps(facts(model, reference, task, precision, shared, float_nodes), indent=1).encode(),
    }

    def write(path: str) -> None:
        storage.makedirs(path)
        for name, data in contents.items():
            storage.write_bytes_atomic(storage.join(path, name), data)

    return write, lambda path: variants.load(path, variants.COPIES["onnx", precision])


def facts(model, reference, task, precision: str, shared: dict, float_nodes=()) -> dict:
    """onnx.json: what the runtime reads besides the graph (runtime.read_facts; `shared`: the
    texts it takes, the padding ladder, the outputs that tell its task), and the decisions the
    graph holds (the export's temperature, its task's decision variables), which a score of the
    copy is made at (trainer.evaluate)."""
    import onnxruntime
    import tf2onnx

    outputs = [output.name for output in model.graph.output]
    saved = getattr(reference, "temperature", None)  # None: an export from before calibration
    decisions = {"temperature": 1.0 if saved is None else float(saved.numpy()), **task.decisions_of_export(reference)}
    return {
        "format": runtime.FORMAT,
        "precision": precision,
        "outputs": outputs,
        "inputs": [graph_input.name for graph_input in model.graph.input],
        "pair": shared["pair"],
        "padded_lengths": [int(n) for n in shared["padded_lengths"]],
        "task_outputs": list(shared["task_outputs"]),
        "joined": shared.get("joined", {}),
        "decisions": decisions,
        "opset": convert.OPSET,
        "tf2onnx": tf2onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "float_nodes": list(float_nodes),
    }


def _checker(reference, task, rows: dict, batch_size: int, folder_of: Callable) -> Callable:
    """check(graph) -> agreement.compare's figures (and rows_per_second) of a candidate int8
    graph against the float32 export on `rows`, its folder written to scratch and loaded as
    export_checked loads it."""
    texts, pairs = rows["texts"], rows["pairs"]
    features = quantize.check_features(reference, task, texts, pairs)
    float32 = quantize.decided(task, reference, texts, pairs, features, batch_size)[0]

    def check(graph) -> dict:
        write, load = folder_of(graph)
        with tempfile.TemporaryDirectory() as scratch:
            path = os.path.join(scratch, "copy")
            write(path)
            candidate, speed = quantize.decided(task, load(path), texts, pairs, features, batch_size)
        figures = agreement.compare(task, float32, candidate, rows["labels"], rows["label_names"])
        return {**figures, "rows_per_second": speed}

    return check


def _refused(every: dict) -> str:
    """The start of the log's line when every node in int8 was refused: why, at what speed."""
    return f"onnx-int8 model: every node in int8 was refused ({every['why']}) at {every['rows_per_second']:.0f} rows/s"


def _smoothed_line(every: dict, smoothed: dict) -> str:
    """The log's line on a smoothed graph that passed where the plain one was refused."""
    return (
        f"{_refused(every)}; then smoothed (int8.smoothed, alpha {int8.SMOOTHING}), "
        f"every node in int8: {_agreed(smoothed)} at {smoothed['rows_per_second']:.0f} rows/s"
    )


def _searched(every: dict, smoothed: dict, found: dict, kept: int, total: int, tried: list) -> str:
    """The log's line on the float fallback: why every node in int8 was refused, plain and
    smoothed, what was kept float, and what that gave, at what speed (the check's, network and
    head)."""
    tries = f"{len(tried)} {'try' if len(tried) == 1 else 'tries'} in {sum(t['seconds'] for t in tried):.0f}s"
    return (
        f"{_refused(every)}, and smoothed ({smoothed['why']}); {kept} of its {total} nodes "
        f"of the smoothed graph kept float (the most sensitive on {RANKING_ROWS} training rows, {tries}): "
        f"{_agreed(found)} at {found['rows_per_second']:.0f} rows/s"
    )


def _agreed(found: dict) -> str:
    """A check's agreement, in the log's words."""
    share = found["label_agreement"]
    return (
        f"{found['metric']} {found['value']:.4f}"
        if share is None
        else f"entities agreeing at {100 * share:.2f}% F1"
        if found["label_agreement_of"] == "entities"
        else f"vectors alike for {100 * share:.2f}% of texts"
        if found["label_agreement_of"] == "vectors"
        else f"labels agreeing on {100 * share:.2f}%"
    )
