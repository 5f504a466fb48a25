"""An ONNX copy (MODEL_DIR/onnx, MODEL_DIR/onnx-int8: trainer/serving/onnx/__init__.py) loaded so
that it reads like a loaded SavedModel to trainer.inference.loaded_model: `tokenize` (the `tokenizers`
library and numpy packing: packing.py), `predict_tokens` (ONNX Runtime), `padded_lengths`, and
the signature's inputs and outputs, which tell the task and whether it reads pairs. The graph
returns the SavedModel's own outputs (temperature, thresholds and label names inside it), so
the task code that reads them is the TensorFlow runtime's, unchanged.

Nothing here imports TensorFlow: this is what runs in the ONNX runtime's environment
(`bash scripts/install.sh onnx`: numpy, onnxruntime, tokenizers).
"""

import json
from typing import NamedTuple

import numpy as np

from trainer import hardware, storage
from trainer.errors import UserError
from trainer.serving import signature

MODEL, GRAPH_FACTS = "model.onnx", "onnx.json"  # onnx.json, written last, marks a copy complete
FORMAT = 1
# What the runtime reads of onnx.json (the export writes it: serving/onnx/copies.py)
FACTS = ("precision", "pair", "padded_lengths", "task_outputs", "decisions")
# The most rows of one ONNX Runtime run. Small runs keep a layer's activations in the cores' L2
# cache: the design study (issue 66) measured int8 rows/s 1,067 / 1,131 / 1,120 / 994 / 844 / 658
# at 4 / 8 / 16 / 32 / 64 / 128 rows, float32 best at 16 too.
ROWS_PER_RUN = 16
# What a run costs beside its padded tokens (rows x width), in tokens: each run reads every weight
# again. cut_runs weighs it against the padding a longer run would add. The design study (issue
# 66: a quiet 2-core Xeon with AMX, 2026-12-05, the SST-2 model, runs side by side, 2 rounds)
# at 4 / 12 / 24 tokens, and as runs of 16 rows whatever their lengths: a server's batches of 16
# SST-2 texts of every length, int8 1,558-1,771 / 1,686-1,712 / 1,651-1,689 rows/s against
# 387-404, float32 578-592 / 561-582 / 471-488 against 158-162; TweetEval's 2,000 tweets in
# trainer.predict's batches, int8 1,342-1,386 / 1,420-1,490 / 1,373-1,427 against 1,257-1,352.
RUN_TOKENS = 12


def session(model: bytes):
    """An ONNX Runtime CPU session of a serialized model, each run on the calling thread alone
    (Runs puts runs side by side; the export's calibration and checks make theirs here too:
    serving/onnx/int8.py)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # At load ORT would fuse Add + LayerNormalization into SkipLayerNormalization, whose CPU
    # kernel measured about 5x slower than the two ops it replaces (the design study, issue 66).
    return ort.InferenceSession(
        model,
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["SkipLayerNormFusion"],
    )


class Runs:
    """ONNX Runtime's runs of one model file, side by side, one per core, each on one thread,
    in trainer.predict and a server alike: the two threads of one small run would wait for each
    other at every op. ONNX Runtime's `run` may be called from several threads at once and
    releases the GIL. (The design study, issue 66: a quiet 2-core Xeon with AMX, 2026-12-04, the
    quickstart model's int8 copy, runs of 16 rows, 4 rounds: 2,728-2,756 rows/s side by side
    against 2,211-2,287 one at a time on both cores on 4,000 SST-2 phrases, 1,185-1,270 against
    1,093-1,166 on TweetEval's 2,000 longer tweets.)"""

    def __init__(self, path: str):
        self._cores = hardware.usable_cores()
        self.session = session(storage.read_bytes(path))
        self._pool = None

    def run(self, outputs: list, feeds: list) -> list:
        """The session's outputs (named `outputs`) of each feed, in order."""
        if self._cores == 1 or len(feeds) < 2:
            return [self.session.run(outputs, feed) for feed in feeds]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self._cores, thread_name_prefix="onnx-run")
        return list(self._pool.map(lambda feed: self.session.run(outputs, feed), feeds))


def read_facts(copy_dir: str) -> dict:
    """onnx.json of a copy, refused in one line when missing (a copy cut short: it is written
    last) or of another format."""
    path = storage.join(copy_dir, GRAPH_FACTS)
    if not storage.exists(path):
        raise UserError(
            f"{copy_dir}: no complete ONNX copy here (no {GRAPH_FACTS}, which the export "
            f"writes last); export it again: python -m trainer.export_quantized"
        )
    try:
        facts = json.loads(storage.read_text(path))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None
    found = facts.get("format") if isinstance(facts, dict) else None
    problem = (
        f"format {found!r}, not {FORMAT}"
        if found != FORMAT
        else next((f"no {key!r}" for key in FACTS if key not in facts), None)
    )
    if problem:
        raise UserError(
            f"{path}: {problem}: the copy was written by another version of the trainer; "
            f"export it again with this one (python -m trainer.export_quantized)"
        )
    return facts


def signature_of(facts: dict) -> signature.Signature:
    """A copy's serving signature as the SavedModel's is read (serving/signature.py): the texts
    it takes (a pair model's `text_pair` too) and the outputs that tell its task."""
    return signature.Signature(("text", "text_pair") if facts["pair"] else ("text",), tuple(facts["task_outputs"]))


class ServingSignature(NamedTuple):
    """What trainer.inference.loaded_model reads of a loaded SavedModel's serving signature."""

    structured_input_signature: tuple  # ((), {text input: spec})
    structured_outputs: tuple


class SavedValue:
    """A value of onnx.json's `decisions` as a loaded SavedModel's variable of it reads."""

    def __init__(self, value):
        self._value = np.asarray(value, np.float32)

    def numpy(self) -> np.ndarray:
        return self._value


class OnnxModule:
    """A loaded ONNX copy, answering as export.load_module's SavedModel does; called from one
    thread at a time (trainer.predict's loop, the server's inference thread)."""

    def __init__(self, copy_dir: str):
        from trainer.serving.onnx import packing

        self.facts = read_facts(copy_dir)
        found = signature_of(self.facts)
        self.serving_signature = ServingSignature(((), {name: None for name in found.inputs}), found.outputs)
        self.padded_lengths = np.asarray(self.facts["padded_lengths"], np.int32)
        self._tokenizer = packing.Tokenizer.from_dir(copy_dir)
        # What rows must not share a run (loaded_model.batch_ladder): one window's from longer
        # rows', which are cut to whole windows (_width); within a window any lengths share one.
        self.run_lengths = [n for n in self.facts["padded_lengths"] if n >= self._tokenizer.max_seq_length]
        self._runs = Runs(storage.join(copy_dir, MODEL))
        self._inputs = [i.name for i in self._runs.session.get_inputs()]
        self._outputs = [o.name for o in self._runs.session.get_outputs()]
        self._joined = self.facts.get("joined", {})  # outputs the graph cannot hold (convert.joined_outside)
        # The export's temperature and its task's decisions (which the graph holds), read as a
        # SavedModel's variables: trainer.evaluate scores a copy at them
        for name in ("temperature", *found.task().decision_variables):
            if name in self.facts["decisions"]:
                setattr(self, name, SavedValue(self.facts["decisions"][name]))

    @property
    def saved_long_texts(self):
        """--long-texts and its window flags, as the export saved them (packing.json)."""
        return self._tokenizer.long_texts

    def tokenize(self, texts, pairs=None) -> dict:
        """int32 features [N, W] of the texts (and pairs), equal to the SavedModel's `tokenize`."""
        return self._tokenizer.features(list(texts), None if pairs is None else list(pairs))

    def predict_tokens(self, features: dict) -> dict:
        """The graph's outputs of `features` (rows sorted by length, as trainer.inference.loaded_model
        batches them), in runs (cut_runs) side by side (Runs); strings as bytes, as TensorFlow
        returns them."""
        _, feeds = run_feeds(features, self._inputs, np.arange(len(features["input_mask"])), self._width)
        runs = self._runs.run(self._outputs, feeds)
        outputs = {name: np.concatenate([_as_saved(run[i]) for run in runs]) for i, name in enumerate(self._outputs)}
        for name, join in self._joined.items():
            outputs[name] = joined_labels(outputs[join["from"]], join["labels"], join["separator"])
        return outputs

    def _width(self, longest: int) -> int:
        """The width a run is cut to: its longest row; past one window (--long-texts windows),
        whole windows, which the graph splits again (the padding ladder's lengths there)."""
        if longest <= self._tokenizer.max_seq_length:
            return longest
        return int(self.padded_lengths[np.searchsorted(self.padded_lengths, longest)])


def cut_runs(widths) -> list:
    """The runs (slices) of rows sorted by token count, each row's `widths` the tokens it would
    be cut to alone: consecutive, at most ROWS_PER_RUN rows, each as wide as its widest row, and
    the fewest padded tokens plus RUN_TOKENS a run (a shortest path over the cuts). A server's
    batch of a few texts of many lengths runs as a few runs of like lengths (not as one run
    padded to its longest text), a batch job's long sorted batch as full runs.
    The int8 copy quantizes each run's activations by that run's own range, so a row's answer
    moves (by about 1e-4) with the rows it runs beside: trainer.predict answers a few texts
    exactly as a server answers them in one request because both cut them here alike
    (scripts/check-images.sh compares them)."""
    cost, cut = [0.0] + [np.inf] * len(widths), [0] * (len(widths) + 1)
    for end in range(1, len(widths) + 1):
        widest = int(widths[end - 1])
        for start in range(max(0, end - ROWS_PER_RUN), end):
            found = cost[start] + RUN_TOKENS + (end - start) * widest
            if found <= cost[end]:  # ties: the later cut, so full runs come first
                cost[end], cut[end] = found, start
    runs, end = [], len(widths)
    while end:
        runs.append(slice(cut[end], end))
        end = cut[end]
    return runs[::-1]


def run_feeds(features: dict, names, order, width=int) -> tuple:
    """(rows, feeds) of each run (cut_runs) of the rows `order` lists (sorted by token count),
    and their features `names`, cut to `width(their longest row)` tokens, as a run takes them."""
    lengths = np.asarray(features["input_mask"]).sum(axis=1)
    rows = [order[run] for run in cut_runs([width(int(n)) for n in lengths[order]])]
    feeds = []
    for run in rows:
        cut = width(int(lengths[run].max()))
        feeds.append({name: np.ascontiguousarray(np.asarray(features[name])[run, :cut], np.int32) for name in names})
    return rows, feeds


def joined_labels(chosen, names, separator: str) -> np.ndarray:
    """Each row's `names` where `chosen` [B, C] is 1, joined by `separator`, as bytes: the
    SavedModel's tf.strings.reduce_join, for a copy of more labels than its graph can join."""
    names = np.asarray(names, object)
    return np.array([separator.join(names[np.flatnonzero(row)]).encode() for row in np.asarray(chosen)], dtype=object)


def _as_saved(value) -> np.ndarray:
    """An output as a loaded SavedModel returns it: ONNX Runtime gives strings as str, TensorFlow
    as bytes (which the task code decodes)."""
    value = np.asarray(value)
    if value.dtype.kind in "OUS":
        return np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(value)
    return value
