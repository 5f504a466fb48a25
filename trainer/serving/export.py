"""The exported model: raw strings in, the task's outputs (class probabilities and label names,
a score, ...: Task.serving_outputs) out.

The preprocessor is attached again in front of the classifier, so the SavedModel needs nothing
but `import tensorflow, tensorflow_text` to serve (TF-Text registers the tokenizer ops; without
it loading fails with "Op type not registered 'CaseFoldUTF8'"). Only the inference graph is
saved: no optimizer slots (they would triple its size).

It computes in float32 whatever the training precision (`computing_in_float32`): the variables
are float32 under every policy, and a model that serves in float16 or bfloat16 runs slowly, or
not at all, on CPUs without native support, for no gain in its predictions.
"""

import contextlib
from collections.abc import Sequence

import tensorflow as tf
import tf_keras

from trainer import storage, task_registry
from trainer.data import input_pipeline
from trainer.explaining import exported
from trainer.inference.loaded_model import SIGNATURE
from trainer.modeling.encoders.layers import INPUT_KEYS
from trainer.serving import model_dir as model_dir_lib

# trainer.training.results checks the validation outputs through this module


class ServingModule(tf.Module):
    """The export of any task: `task` (default: --task auto's) computes its outputs from the
    classifier's, with `decisions` (default: the task's export_decisions) saved as variables."""

    def __init__(
        self,
        preprocessor,
        classifier: tf_keras.Model,
        label_names: Sequence[str],
        max_seq_length: int,
        temperature: float = 1.0,
        pair: bool = False,
        long_texts="truncate",
        task=None,
        decisions: dict | None = None,
    ):
        super().__init__(name="text_classifier")
        self.task = task or task_registry.by_name(task_registry.AUTO)
        self.preprocessor = preprocessor
        # --long-texts (a mode or a input_pipeline.LongTexts), applied by `tokenize` inside the
        # graph; variables, so a loaded model tells it (its checked copies are built alike,
        # trainer.serving.quantize.module_like).
        self._long_texts = input_pipeline.LongTexts.of(long_texts)
        self.long_texts = tf.Variable(self._long_texts.mode, trainable=False, name="long_texts")
        self.window_overlap, self.max_windows = (
            tf.Variable(value, trainable=False, name=name)
            for name, value in (
                ("window_overlap", self._long_texts.window_overlap),
                ("max_windows", self._long_texts.max_windows),
            )
        )
        # Only the classifier's variables are tracked, not the Keras model: saving a Keras model
        # serializes (and traces) every layer and, once compiled, its optimizer slots too: a
        # 3x larger and several times slower export for nothing the serving function needs.
        self.classifier_variables = list(classifier.variables)
        self._forward = lambda features: classifier(features, training=False)
        self.label_names = tf.constant(list(label_names), tf.string)
        self.lengths = input_pipeline.padded_lengths(max_seq_length, self._long_texts.windows)
        # The ladder, saved: trainer.predict batches a loaded model's rows by it.
        self.padded_lengths = tf.Variable(self.lengths, trainable=False, name="padded_lengths")
        # Calibration (trainer.reporting.calibration): probabilities are softmax(logits / T).
        # A variable, so a loaded model still tells its T (the report reads it back).
        self.temperature = tf.Variable(float(temperature), trainable=False, name="temperature")
        # What the task decides with, each a variable read back by a loaded model's users: a
        # binary model's `threshold` (--target-precision/--target-recall: it predicts its second
        # class when that class's probability reaches it), a multi-label model's `thresholds`.
        for name, value in (self.task.export_decisions() if decisions is None else decisions).items():
            setattr(self, name, tf.Variable(tf.constant(value, tf.float32), trainable=False, name=name))
        # A sentence-pair model's signature takes both texts: `text` and `text_pair`.
        texts = [tf.TensorSpec([None], tf.string, name="text")]
        if pair:
            texts.append(tf.TensorSpec([None], tf.string, name="text_pair"))
        # The signature's two halves, saved as functions of their own: batch prediction
        # (trainer.inference.loaded_model) tokenizes first, to batch texts of equal token counts.
        # Traced as written: AutoGraph has nothing to convert in packing, and converting TF-Text's
        # functions cost seconds of every export and every process loading one's tokenizer.
        self.tokenize = tf.function(self._tokenize, input_signature=texts, autograph=False)
        self.predict_tokens = tf.function(
            self._predict_tokens,
            input_signature=[{name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_KEYS}],
        )
        self.serve = tf.function(self._serve_pair if pair else self._serve, input_signature=texts)
        # The head's outputs of the classifier's logits (scores), saved on their own: a model
        # computed elsewhere (the int8 one, trainer.serving.tflite) returns exactly these.
        self.outputs = tf.function(
            self._outputs_of, input_signature=[tf.TensorSpec([None, None], tf.float32, name="logits")]
        )
        # Token attributions of these outputs (trainer.explaining.exported); None, and not
        # saved, for an encoder whose word embeddings cannot be fed (TF-Hub).
        self.explain_tokens = exported.saved_function(self, classifier, preprocessor)

    def _tokenize(self, text, text_pair=None):
        """int32 features [batch, max_seq_length], as the preprocessor pads them (windows:
        [batch, max_windows * max_seq_length], input_pipeline.encode)."""
        features = input_pipeline.encode(self.preprocessor, text, text_pair, self._long_texts)
        return {name: tf.cast(features[name], tf.int32) for name in INPUT_KEYS}

    def _predict_tokens(self, features):
        """The outputs of features of any width: each batch is cut to its ladder length."""
        features = input_pipeline.trim_to_padded_length(features, self.lengths)
        batch = tf.shape(features["input_word_ids"])[0]
        return self._outputs(tf.cast(self._forward(features), tf.float32), batch)

    def _outputs_of(self, logits):
        return self._outputs(logits, tf.shape(logits)[0])

    def _serve(self, text, text_pair=None):
        args = (text,) if text_pair is None else (text, text_pair)
        return self.predict_tokens(self.tokenize(*args))

    def _serve_pair(self, text, text_pair):
        return self._serve(text, text_pair)

    def _outputs(self, logits, batch):
        return self.task.serving_outputs(self, logits, batch)


def saved_long_texts(module) -> input_pipeline.LongTexts:
    """A loaded export's --long-texts and window flags (truncate for an export from before)."""
    mode = getattr(module, "long_texts", None)
    if mode is None:
        return input_pipeline.LongTexts()
    windows = getattr(module, "max_windows", None)
    if windows is None:
        return input_pipeline.LongTexts(mode.numpy().decode())
    return input_pipeline.LongTexts(mode.numpy().decode(), int(module.window_overlap.numpy()), int(windows.numpy()))


@contextlib.contextmanager
def computing_in_float32(classifier: tf_keras.Model, enabled: bool = True):
    """While tracing the serving function: every layer of `classifier` computes in float32.

    Under mixed_bfloat16 / mixed_float16 each layer casts its float32 variables and inputs to its
    policy's compute dtype when called, so a graph traced as is computes in that dtype wherever it
    is loaded. Switching the policies for the trace, and back after it, exports the same weights
    computing in float32 and leaves the trained model as it was. `enabled=False` keeps the
    training precision.
    """
    layers = [
        layer
        for layer in (classifier, *classifier.submodules)
        if enabled and isinstance(layer, tf_keras.layers.Layer) and layer.dtype_policy.compute_dtype != "float32"
    ]
    policies = [layer.dtype_policy for layer in layers]
    try:
        for layer in layers:
            layer._set_dtype_policy("float32")  # tf_keras has no public setter for a layer's policy
        yield
    finally:
        for layer, policy in zip(layers, policies):
            layer._set_dtype_policy(policy)


def export(module: ServingModule, model_dir: str, write_dir: str = None, job_dir: str = None) -> None:
    """Saves to a temporary sibling and renames into place: a reader never sees half a model.
    Only an export of this package's is ever replaced (trainer.serving.model_dir); its marker
    names `job_dir`, the training run's (None: an export made outside a run).

    `write_dir` is where this process writes: under MultiWorkerMirroredStrategy every worker
    must call save, and only the chief's copy lands in `model_dir`.
    """
    target = write_dir or model_dir
    model_dir_lib.check_replaceable(target)
    tmp = storage.temporary_sibling(target)
    save(module, tmp)
    model_dir_lib.write_marker(tmp, job_dir)
    storage.replace_directory(tmp, target, marker=model_dir_lib.MARKER)


def save(module: ServingModule, path: str) -> None:
    tf.saved_model.save(module, path, signatures={SIGNATURE: module.serve})


def load_module(model_dir: str):
    """An exported model as loaded: its signatures and, when exported by this version,
    `tokenize` and `predict_tokens` (imports tensorflow_text for its ops)."""
    import tensorflow_text  # noqa: F401  registers the tokenizer ops the graph uses

    return tf.saved_model.load(model_dir)


def load(model_dir: str):
    """The serving function of an exported model."""
    return load_module(model_dir).signatures[SIGNATURE]
