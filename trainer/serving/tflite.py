"""The int8 model: the classifier in TensorFlow Lite, its transformer layers quantized to int8.

Dynamic-range quantization stores a dense kernel in int8 (per output channel) and quantizes each
row's activations on the fly, so the matmuls, three quarters of prediction's time
(bench/predict_parts.py), run as int8 dot products; LayerNorm, softmax and the head stay float.

The classifier is cut after its first transformer layer into two flatbuffers:
- front.tflite: the embeddings and layer 0, float32 computed, float16 stored (half the size;
  widened to float32 once, when the interpreter loads);
- model.tflite: the other layers and the head, quantized.
Quantizing every layer moved TweetEval validation accuracy by -0.60 point (labels agreeing on
99.05%); keeping layer 0 in float: -0.05 (99.60%), at 2.65x the float32 SavedModel's speed
(the first layer's inputs carry the encoder's outlier features, which int8 rounds worst).

Tokenizing stays in the float32 SavedModel beside it (TF-Text's ops are not TFLite builtins), and
so do the outputs (temperature, label names, thresholds: its `outputs` function), so the int8
model returns exactly what the float32 one returns. It runs on LiteRT (ai-edge-litert), the
interpreter that replaced tf.lite.Interpreter (deprecated since TF 2.20).

A tagger's int8 model (tasks/tagging/int8.py) is cut the same way, its head reading every token;
the float32 export splits the words and cuts them into windows (its `tokenize`) and reads the
entities of the logits (its `outputs`), so windows, offsets and names come from the float32
graph itself.
"""

import re

import numpy as np

import trainer
from trainer import hardware, storage
from trainer.errors import UserError
from trainer.modeling.encoders.layers import INPUT_KEYS

FRONT, FILENAME = "front.tflite", "model.tflite"  # model.tflite marks the copy complete
FILES = (FRONT, FILENAME)
FLOAT_LAYERS = 1
_DELEGATE_NOTICE = re.compile(r"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.")
# The converter's own C++ log lines: TF 2.20's converter library logs through an absl of its own,
# which TF_CPP_MIN_LOG_LEVEL does not reach (seen in the TPU image, tensorflow-tpu 2.20).
_CONVERTER_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)|"
    r"[IW]\d{4} [\d:. ]+\d+ (tf_tfl_flatbuffer_helpers|mlir_graph_optimization_pass)\.cc)"
)


def convert(classifier) -> dict:
    """{file name: flatbuffer} of a float32 Keras classifier with the native encoder."""
    import tensorflow as tf
    import tf_keras

    from trainer.modeling import heads
    from trainer.modeling.encoders import families

    encoder = heads.encoder_layer(classifier)
    cut = encoder.get_layer(f"transformer/layer_{FLOAT_LAYERS - 1}").output
    front = tf_keras.Model(encoder.inputs, cut)
    hidden = tf_keras.Input(shape=(None, cut.shape[-1]), name="hidden")
    mask = tf_keras.Input(shape=(None,), dtype=tf.int32, name="input_mask")
    back = tf_keras.Model(
        [hidden, mask],
        heads.apply_head(
            heads.head_layers(classifier),
            families.of_config(encoder.encoder_config).layers_from(encoder, hidden, mask, FLOAT_LAYERS),
            mask,
        ),
    )
    ids = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_KEYS}
    return {
        FRONT: _flatbuffer(front, [ids], tf.float16),
        FILENAME: _flatbuffer(
            back,
            [
                tf.TensorSpec([None, None, cut.shape[-1]], tf.float32, name="hidden"),
                tf.TensorSpec([None, None], tf.int32, name="input_mask"),
            ],
            tf.int8,
        ),
    }


def _flatbuffer(model, signature: list, weights) -> bytes:
    """`model` converted with its weights stored as `weights` (int8: dynamic-range quantized)."""
    import tensorflow as tf

    forward = tf.function(
        lambda *args: model(args[0] if len(args) == 1 else list(args), training=False), input_signature=signature
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions([forward.get_concrete_function()], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if weights == tf.float16:
        converter.target_spec.supported_types = [tf.float16]
    with trainer.stderr_filtered(_CONVERTER_NOISE):
        return converter.convert()


def read(path: str) -> dict:
    """{file name: flatbuffer} of an int8 copy's directory (MODEL_DIR/int8)."""
    return {name: storage.read_bytes(storage.join(path, name)) for name in FILES}


class Int8Network:
    """The two interpreters (front.tflite, model.tflite): token ids in, the classifier's logits
    out. One interpreter each: calls from one thread at a time (the server's single inference
    thread)."""

    def __init__(self, flatbuffers: dict):
        from ai_edge_litert.interpreter import Interpreter

        # LiteRT applies its XNNPACK delegate at the first call and says so on stderr, from C++.
        with trainer.stderr_filtered(_DELEGATE_NOTICE):
            self._front, self._back = (
                Interpreter(model_content=flatbuffers[name], num_threads=hardware.usable_cores()).get_signature_runner()
                for name in FILES
            )
            self.logits({name: np.zeros((1, 1), np.int32) for name in INPUT_KEYS})

    def logits(self, features) -> np.ndarray:
        ids = {name: np.ascontiguousarray(np.asarray(features[name], np.int32)) for name in INPUT_KEYS}
        hidden = next(iter(self._front(**ids).values()))
        return np.asarray(next(iter(self._back(hidden=hidden, input_mask=ids["input_mask"]).values())), np.float32)


def float32_functions(float32_module) -> None:
    """Refuses a float32 export from before int8 models: the int8 one borrows its functions."""
    if not hasattr(float32_module, "outputs"):
        raise UserError(
            "the float32 model beside the int8 one predates int8 models (it has "
            "no `outputs` function); export the run again"
        )


class Int8Module:
    """A loaded int8 model that reads like a loaded float32 export (export.load_module):
    `tokenize`, `predict_tokens` and `signatures` of the float32 model, the classifier in
    LiteRT."""

    def __init__(self, float32_module, flatbuffers: dict):
        float32_functions(float32_module)
        self.float32 = float32_module  # holds the variables its functions read
        self.signatures = float32_module.signatures
        self.tokenize = float32_module.tokenize
        self._outputs = float32_module.outputs
        self._network = Int8Network(flatbuffers)

    def predict_tokens(self, features):
        """The float32 model's outputs of `features` (cut to their ladder length by the caller,
        trainer.inference.loaded_model) computed by the int8 classifier."""
        logits = self._network.logits(features)
        return self._outputs(logits.reshape(len(logits), -1))


class Signature:
    """A serving function in place of a loaded signature: called with `text=`, and otherwise the
    float32 signature (its input and output structures, which trainer.inference.loaded_model reads)."""

    def __init__(self, function, float32_signature):
        self._function = function
        self._float32 = float32_signature

    def __call__(self, **inputs):
        return self._function(**inputs)

    def __getattr__(self, name):
        return getattr(self._float32, name)


def int8_module(float32_module, flatbuffers: dict):
    """The int8 model beside a loaded float32 export, answering as that one does: its task's
    unit makes it (Int8Module where the export predicts from tokens; a tagger's answers through
    its signature, tasks/tagging/int8.py)."""
    from trainer.inference import loaded_model

    return loaded_model.task_of(float32_module).unit.int8_module(float32_module, flatbuffers)
