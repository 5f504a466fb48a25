"""The int8 model: the classifier as a dynamic-range quantized TensorFlow Lite flatbuffer.

Dynamic-range quantization stores every dense kernel in int8 (per output channel) and quantizes
each row's activations on the fly, so the matmuls, three quarters of prediction's time
(bench/predict_parts.py), run as int8 dot products; LayerNorm, softmax and the head stay float.
Measured on SST-2 validation (README's Benchmarks): 3.4x the float32 SavedModel's speed, a
quarter of its size, labels agreeing on 99.5% of rows. ONNX Runtime's dynamic quantization was
tried first: one activation scale per batch disagreed with float32 on 1.4% of those rows.

Only the classifier (int32 features in, logits or scores out) is converted. Tokenizing stays in
the float32 SavedModel beside it (TF-Text's ops are not TFLite builtins), and so do the outputs
(temperature, label names, thresholds: its `outputs` function), so the int8 model returns
exactly what the float32 one returns. It runs on LiteRT (ai-edge-litert), the interpreter that
replaced tf.lite.Interpreter (deprecated since TF 2.20).
"""
import os
import re

import numpy as np

import trainer
from trainer.errors import UserError
from trainer.modeling.encoders.bert import INPUT_KEYS

FILENAME = "model.tflite"
_DELEGATE_NOTICE = re.compile(r"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.")


def convert(model) -> bytes:
    """The flatbuffer of a float32 Keras classifier, its kernels quantized to int8."""
    import tensorflow as tf

    spec = [{name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_KEYS}]
    forward = tf.function(lambda features: model(features, training=False), input_signature=spec)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([forward.get_concrete_function()], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic range: int8 weights
    return converter.convert()


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Int8Module:
    """A loaded int8 model that reads like a loaded float32 export (export.load_module):
    `tokenize`, `predict_tokens` and `signatures` of the float32 model, the classifier in int8.
    One interpreter: calls from one thread at a time (the server's single inference thread)."""

    def __init__(self, float32_module, flatbuffer: bytes):
        from ai_edge_litert.interpreter import Interpreter

        if not hasattr(float32_module, "outputs"):
            raise UserError("the float32 model beside the int8 one predates int8 models (it has "
                            "no `outputs` function); export the run again")
        self.float32 = float32_module  # holds the variables its functions read
        self.signatures = float32_module.signatures
        self.tokenize = float32_module.tokenize
        self._outputs = float32_module.outputs
        # LiteRT applies its XNNPACK delegate at the first call and says so on stderr, from C++.
        with trainer.stderr_filtered(_DELEGATE_NOTICE):
            self._classifier = Interpreter(model_content=flatbuffer, num_threads=_threads()).get_signature_runner()
            self._classifier(**{name: np.zeros((1, 1), np.int32) for name in INPUT_KEYS})

    def predict_tokens(self, features):
        """The float32 model's outputs of `features` (cut to their ladder length by the caller,
        trainer.serving.predict) computed by the int8 classifier."""
        arrays = {name: np.ascontiguousarray(np.asarray(features[name], np.int32)) for name in INPUT_KEYS}
        logits = next(iter(self._classifier(**arrays).values()))
        return self._outputs(np.asarray(logits, np.float32).reshape(len(arrays[INPUT_KEYS[0]]), -1))
