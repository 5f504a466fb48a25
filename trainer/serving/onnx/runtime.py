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
# Rows per ONNX Runtime call. trainer.predict hands over batches of rows of one padded length,
# sorted by token count (up to --batch-size); each runs here in slices of this many rows, each
# cut to its own longest row. Small batches keep a layer's activations in the cores' L2 cache:
# the design study (issue 66) measured int8 rows/s 1,067 / 1,131 / 1,120 / 994 / 844 / 658 at
# 4 / 8 / 16 / 32 / 64 / 128 rows, float32 best at 16 too, and cutting at the longest row 5-15%
# faster than at the padding ladder's length (which TensorFlow needs to reuse its traced
# graphs; ONNX Runtime has none to reuse).
ROWS_PER_RUN = 16
# A server's session computes each run on every core this process may use, as TensorFlow and
# LiteRT compute (a batch job's runs go side by side instead: Runs). On a quiet 2-core Xeon with
# AMX (bench/onnx_copies.py's machine, 2026-12-02), 4,000 SST-2 texts, medians of 3: int8 1,847
# rows/s on 2 threads against 1,195 on 1, float32 821 against 450. (On the same machine shared
# with other work, load 4.5-6, 1 thread had beaten 2: two threads wait for each other on cores
# other processes hold. A serving container has its cores to itself.)


def session(model: bytes, threads: int = 1, spinning: bool = True):
    """An ONNX Runtime CPU session of a serialized model, each run on `threads` threads (the
    export's calibration and checks make theirs here too: serving/onnx/int8.py)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not spinning:  # a server: idle threads sleep between requests instead of spinning
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # At load ORT would fuse Add + LayerNormalization into SkipLayerNormalization, whose CPU
    # kernel measured about 5x slower than the two ops it replaces (the design study, issue 66).
    return ort.InferenceSession(
        model,
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["SkipLayerNormFusion"],
    )


class Runs:
    """ONNX Runtime's runs of one model file. A batch job's (trainer.predict, the export's
    checks) go side by side, one per core, each on one thread; a server's one at a time on every
    core. Side by side is faster for a batch job because the two threads of one small run wait
    for each other at every op (the design study, issue 66: a quiet 2-core Xeon with AMX,
    2026-12-04, the quickstart model's int8 copy, runs of 16 rows, 4 rounds: 2,728-2,756 rows/s
    side by side against 2,211-2,287 one at a time on 4,000 SST-2 phrases, 1,185-1,270 against
    1,093-1,166 on TweetEval's 2,000 longer tweets). A server's batches are small and often one
    text: there the same Xeon (an SST-2 model, 800 texts one per request, 2 rounds in ABBA order)
    measured the float32 copy slower side by side at 1, 4 and 16 clients (65-67, 121-126 and
    216-220 texts/s against 76-77, 148-158 and 239-258), the int8 copy within its noise (98,
    237-249, 515-529 against 101, 229-244, 434-512). Either way the runs are the same 16 rows:
    the int8 copy quantizes each run's activations by that run's own range, so a row's answer
    moves (by about 1e-4) with the rows it runs beside, and trainer.predict answers a few texts
    exactly as the server answers them in one request only while both cut the same runs
    (scripts/check-images.sh compares them). ONNX Runtime's `run` may be called from several
    threads at once and releases the GIL."""

    def __init__(self, path: str, serving: bool = False):
        cores = hardware.usable_cores()
        self._side_by_side = 1 if serving else cores
        self.session = session(storage.read_bytes(path), cores if self._side_by_side == 1 else 1, not serving)
        self._pool = None

    def run(self, outputs: list, feeds: list) -> list:
        """The session's outputs (named `outputs`) of each feed, in order."""
        if self._side_by_side == 1 or len(feeds) < 2:
            return [self.session.run(outputs, feed) for feed in feeds]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self._side_by_side, thread_name_prefix="onnx-run")
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
    thread at a time (trainer.predict's loop, the server's inference thread). `serving`: a
    server's (Runs)."""

    def __init__(self, copy_dir: str, serving: bool = False):
        from trainer.serving.onnx import packing

        self.facts = read_facts(copy_dir)
        found = signature_of(self.facts)
        self.serving_signature = ServingSignature(((), {name: None for name in found.inputs}), found.outputs)
        self.padded_lengths = np.asarray(self.facts["padded_lengths"], np.int32)
        self._tokenizer = packing.Tokenizer.from_dir(copy_dir)
        self._runs = Runs(storage.join(copy_dir, MODEL), serving)
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
        batches them), ROWS_PER_RUN rows per run, each run cut to its longest row; strings as
        bytes, as TensorFlow returns them."""
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


def run_feeds(features: dict, names, order, width=int) -> tuple:
    """(rows, feeds) of each run: ROWS_PER_RUN of the rows `order` lists (sorted by token count),
    and their features `names`, cut to `width(their longest row)` tokens, as a run takes them."""
    lengths = np.asarray(features["input_mask"]).sum(axis=1)
    rows = [order[start : start + ROWS_PER_RUN] for start in range(0, len(order), ROWS_PER_RUN)]
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
