"""TF-Hub format: downloading handles, the hub.KerasLayer backend, and writing SavedModels.

The exported SavedModels follow the TF-Hub text-encoder conventions
(https://www.tensorflow.org/hub/common_saved_model_apis/text): an encoder taking the
input_word_ids/input_mask/input_type_ids dict, and a preprocessor with `tokenize` and
`bert_pack_inputs(segments, seq_length=...)`, both loadable with hub.KerasLayer anywhere.
"""

import dataclasses
import hashlib
import json
import os
import tempfile

import tensorflow as tf
import tensorflow_hub as hub
import tf_keras

from trainer.errors import UserError
from trainer.modeling.encoders import families
from trainer.modeling.encoders.layers import INPUT_KEYS

# NETWORK_TIMEOUT_SECONDS: also read from here by callers and tests.
from trainer.modeling.encoders.network import NETWORK_TIMEOUT_SECONDS, unreachable  # noqa: F401
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

# The asset of an encoder export holding the network's config as JSON: the name written, then
# the name exports before issue #50 gave it (both are read).
CONFIG_ASSETS = ("encoder_config_file", "bert_config_file")


def is_handle(encoder: str) -> bool:
    return encoder.startswith(("http://", "https://"))


def resolve_handle(handle: str, cache_dir: str, flag: str, name: str | None = None) -> str:
    """The local directory of a TF-Hub/Kaggle handle, downloading it once.

    Downloads land under `cache_dir`/tfhub unless TFHUB_CACHE_DIR is set, so a Docker image can
    bake them in. Without network, this fails in seconds with a UserError rather than hanging in
    tensorflow_hub's download retries.
    """
    os.environ.setdefault("TFHUB_CACHE_DIR", os.path.join(cache_dir, "tfhub"))
    # tensorflow_hub caches a handle under sha1(handle) and then never touches the network.
    cached = os.path.join(hub.resolver.tfhub_cache_dir(use_temp=True), hashlib.sha1(handle.encode("utf8")).hexdigest())
    if not (tf.io.gfile.isdir(cached) and tf.io.gfile.listdir(cached)):
        _require_network(handle, flag, name)
    try:
        return hub.resolve(handle)
    except Exception as error:  # urllib, tarfile and TF errors all mean "could not fetch it"
        raise UserError(
            f"{flag} {name or handle}: downloading {handle} failed ({error}). {_offline_hint(flag, handle, name)}"
        ) from None


def _offline_hint(flag: str, handle: str, name: str | None) -> str:
    hint = f"Where there is network, fetch {handle}?tf-hub-format=compressed (a .tar.gz of the SavedModel)"
    if flag == "--encoder":
        hint += f" or run `python -m trainer.export_encoder --encoder {name or handle} --output-dir DIR`"
    return f"{hint}, then point {flag} at a local or gs:// copy of that directory."


def _require_network(url: str, flag: str, name: str | None):
    """Connects to the handle's host (or the proxy in use) with a short timeout."""
    failure = unreachable(url)
    if failure:
        raise UserError(
            f"{flag} {name or url} needs the network: cannot reach {failure}. {_offline_hint(flag, url, name)}"
        )


def hub_network(path: str) -> tf_keras.layers.Layer:
    """hub.KerasLayer over an encoder SavedModel, fine-tuned with the rest of the model.

    Its matmuls stay float32 under any Keras dtype policy (tensorflow/hub#466, #790).
    """
    return hub.KerasLayer(path, trainable=True, name="hub_encoder")


class HubPreprocessor(tf_keras.layers.Layer):
    """A TF-Hub preprocess SavedModel behind the same interface as WordPiecePreprocessor.

    Calls the SavedModel's `tokenize` and `bert_pack_inputs(seq_length=...)`, the documented
    way to pack at a length other than the SavedModel's default of 128.
    """

    def __init__(self, path: str, seq_length: int = 128, **kwargs):
        kwargs["trainable"] = False  # nothing to train; also when rebuilt from get_config
        super().__init__(**kwargs)
        self.path = path
        self.seq_length = seq_length
        self._preprocess = hub.load(path)
        if not (hasattr(self._preprocess, "tokenize") and hasattr(self._preprocess, "bert_pack_inputs")):
            raise UserError(
                f"--preprocessor {path}: not a TF-Hub BERT preprocessor (it has no tokenize and bert_pack_inputs)"
            )

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        return self._preprocess.tokenize(strings)

    def bert_pack_inputs(self, segments: list[tf.RaggedTensor], seq_length: int | None = None) -> dict[str, tf.Tensor]:
        seq_length = self.seq_length if seq_length is None else seq_length
        return self._preprocess.bert_pack_inputs(segments, seq_length=seq_length)

    def call(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)])

    def get_config(self):
        return {**super().get_config(), "path": self.path, "seq_length": self.seq_length}


def save_encoder_savedmodel(
    network: tf_keras.layers.Layer, directory: str, vocab_file: str | None, lower_case: bool | None
):
    """Writes a TF-Hub-format encoder SavedModel, always float32.

    A SavedModel keeps the dtypes it was traced with: one exported under mixed_bfloat16 would
    compute and return bf16 wherever it is loaded, so native networks are rebuilt in float32
    (which copies their current, possibly fine-tuned, weights). Like Model Garden's TF-Hub
    exports it carries `vocab_file` and `do_lower_case`, so the native backend can read it
    back with its tokenizer; `encoder_config_file` records what the variable shapes do not tell.

    The root is a plain trackable holding one traced function per `training` value and the
    variables (the Reusable SavedModel API hub.KerasLayer reads), not the Keras model itself,
    whose save also traces every layer for Keras metadata nobody reads here (MiniLM: 3 s, not 4-5 s).
    """
    config = getattr(network, "encoder_config", None)
    # A hub.KerasLayer over one of this package's exports: its config asset is passed on.
    resolved = getattr(network, "resolved_object", None)
    carried = next((getattr(resolved, name) for name in CONFIG_ASSETS if hasattr(resolved, name)), None)
    root = tf.train.Checkpoint()
    with tempfile.TemporaryDirectory() as scratch:
        if config is not None:
            float32_network = families.build(config, dtype="float32")
            float32_network.set_weights(network.get_weights())
            network = float32_network
            config_file = os.path.join(scratch, "encoder_config.json")
            with open(config_file, "w") as f:
                json.dump(dataclasses.asdict(config), f, indent=2)
            root.encoder_config_file = tf.saved_model.Asset(config_file)
        elif carried is not None:
            root.encoder_config_file = carried
        if vocab_file is not None:
            root.vocab_file = tf.saved_model.Asset(vocab_file)
            root.do_lower_case = tf.Variable(bool(lower_case), trainable=False)

        @tf.function
        def call(inputs, training=False):
            return network(inputs, training=training)

        spec = {key: tf.TensorSpec([None, None], tf.int32, name=key) for key in INPUT_KEYS}
        for training in (False, True):
            call.get_concrete_function(spec, training=training)
        root.__call__ = call
        root.variables = list(network.variables)
        root.trainable_variables = list(network.trainable_variables)
        root.regularization_losses = []
        tf.saved_model.save(root, directory)


class _PackInputsExport(tf.Module):
    """`bert_pack_inputs` with an overridable seq_length, traced for 1-2 segments of ragged
    rank 1-2 (a SavedModel cannot trace new signatures after export), as in Model Garden's
    export_tfhub_lib."""

    def __init__(self, preprocessor: WordPiecePreprocessor):
        super().__init__()

        # Autograph has nothing to convert here and adds seconds per trace of TF-Text code.
        @tf.function(autograph=False)
        def call(segments, seq_length=preprocessor.seq_length):
            return preprocessor.bert_pack_inputs(segments, seq_length=seq_length)

        for ragged_rank in (1, 2):
            for num_segments in (1, 2):
                call.get_concrete_function(
                    [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)] * num_segments,
                    seq_length=tf.TensorSpec([], tf.int32),
                )
        self.__call__ = call


class _PreprocessorExport(tf.Module):
    """The TF-Hub preprocessor API: `__call__(strings)`, `tokenize`, `bert_pack_inputs`."""

    def __init__(self, preprocessor: WordPiecePreprocessor):
        super().__init__()
        # The tokenizer's files and (a subword tokenizer's) module are tracked, not the Keras
        # layer itself, which SavedModel would serialise as a layer. The module's tables are
        # resources the functions below read; WordPiece's are constants in the graph.
        self.vocab_file = preprocessor.assets[0]
        self.tokenizer = getattr(preprocessor, "tokenizer", None)
        strings = tf.TensorSpec([None], tf.string)
        self.__call__ = tf.function(preprocessor.call, input_signature=[strings], autograph=False)
        self.tokenize = tf.function(preprocessor.tokenize, input_signature=[strings], autograph=False)
        self.bert_pack_inputs = _PackInputsExport(preprocessor)


def save_preprocessor_savedmodel(preprocessor: tf_keras.layers.Layer, directory: str):
    """Writes a TF-Hub-format preprocessor SavedModel (vocab in assets/)."""
    if isinstance(preprocessor, HubPreprocessor):
        _copy_tree(preprocessor.path, directory)
        return
    module = _PreprocessorExport(preprocessor)
    tf.saved_model.save(module, directory, signatures={"serving_default": module.__call__})


def save_encoder_and_preprocessor(network, preprocessor, output_dir: str):
    """OUTPUT_DIR/encoder + OUTPUT_DIR/preprocessor: what `trainer.export_encoder` writes, and
    what `--encoder OUTPUT_DIR` reads back."""
    native = isinstance(preprocessor, WordPiecePreprocessor)
    save_encoder_savedmodel(
        network,
        os.path.join(output_dir, "encoder"),
        preprocessor.vocab_file if native else None,
        preprocessor.lower_case if native else None,
    )
    save_preprocessor_savedmodel(preprocessor, os.path.join(output_dir, "preprocessor"))


def _copy_tree(source: str, target: str):
    """Recursive copy through tf.io.gfile (os.path would mangle gs:// URLs)."""
    source = source.rstrip("/")
    for parent, _, files in tf.io.gfile.walk(source):
        destination = target.rstrip("/") + parent[len(source) :]
        tf.io.gfile.makedirs(destination)
        for name in files:
            tf.io.gfile.copy(f"{parent}/{name}", f"{destination}/{name}", overwrite=True)
