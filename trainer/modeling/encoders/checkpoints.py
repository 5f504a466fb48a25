"""Readers of pretrained encoder weights in three formats, into the native encoder's names.

Every reader returns a `Checkpoint`: the architecture, the weights keyed by the native
encoder's canonical variable names (kernels may be flat [in, out]; `layers.assign_weights`
reshapes them), and the tokenizer file with its casing. Hugging Face directories hold any
family trainer.modeling.encoders.families knows; Google's and TF-Hub's hold BERTs. Paths go
through tf.io.gfile, so local directories and gs:// URLs both work.
"""

import dataclasses
import json
import numbers
import os
import re

import numpy as np
import tensorflow as tf

from trainer.errors import UserError
from trainer.modeling.encoders import families, hf_weights
from trainer.modeling.encoders.hub import CONFIG_ASSETS
from trainer.modeling.encoders.layers import EncoderConfig, canonical_name
from trainer.modeling.encoders.models import Family
from trainer.modeling.encoders.models import bert as bert_family
from trainer.modeling.encoders.tokenizers.word_piece import check_vocab

LAYOUTS_HELP = (
    "config.json + model.safetensors or tf_model.h5 + the tokenizer's files "
    "(Hugging Face), "
    "bert_config.json + bert_model.ckpt.* + vocab.txt (Google BERT), "
    "or saved_model.pb (TF-Hub SavedModel)"
)


@dataclasses.dataclass
class Checkpoint:
    config: EncoderConfig  # or the family's own config_class
    weights: dict[str, np.ndarray]
    vocab_file: str | None  # the tokenizer's file; None when a TF-Hub SavedModel has none
    lower_case: bool | None
    source: str
    family: Family = bert_family.FAMILY
    config_file: str | None = None  # what `config` was read from, for errors
    kept_layers: tuple[int, ...] | None = None  # --encoder-layers: the ones kept (depth.py)

    def preprocessor(self, seq_length: int):
        """The family's preprocessor over this checkpoint's tokenizer file; a UserError when the
        tokenizer has ids the word embeddings have no row for."""
        layer = self.family.preprocessor(self.vocab_file, self.lower_case, seq_length)
        if self.config is not None:
            check_vocab_fits(self.config, layer.vocab_size, self.config_file, self.vocab_file)
        return layer


def layout(directory: str) -> str:
    """'hub', 'hf' or 'google', from the files present; a UserError naming what is missing."""
    if not tf.io.gfile.isdir(directory):
        raise UserError(f"--encoder {directory}: no such directory")
    if _exists(directory, "saved_model.pb"):
        return "hub"
    if _exists(directory, "config.json"):
        if hf_weights.weights_file(directory) is None:
            if _exists(directory, hf_weights.PYTORCH_FILE):
                raise UserError(f"--encoder {directory}: " + hf_weights.pytorch_only_message(directory, directory))
            _require(directory, "model.safetensors", "(nor tf_model.h5)")
        return "hf"
    if _exists(directory, "bert_config.json"):
        _require(directory, "bert_model.ckpt.index")
        _require(directory, "vocab.txt")
        return "google"
    raise UserError(f"--encoder {directory}: not a checkpoint directory; expected {LAYOUTS_HELP}")


def read_checkpoint(directory: str) -> Checkpoint:
    return {"hf": read_hf_checkpoint, "google": read_google_checkpoint, "hub": read_hub_savedmodel}[layout(directory)](
        directory
    )


def _exists(directory, name):
    return tf.io.gfile.exists(os.path.join(directory, name))


def _require(directory, name, hint=""):
    if not _exists(directory, name):
        raise UserError(f"--encoder {directory}: missing {name} {hint}".rstrip())


def _read_json(path):
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"--encoder: {path} is not valid JSON ({e.msg}, line {e.lineno})") from None


def check_directory(directory: str) -> None:
    """Reads a checkpoint directory's config and vocabulary and its weights' shapes, not the
    weights: a malformed or inconsistent checkpoint fails in a second, before the run reads
    any data."""
    kind = layout(directory)
    if kind == "hub":
        return
    if kind == "google":
        config_path, vocab_path = (os.path.join(directory, name) for name in ("bert_config.json", "vocab.txt"))
        config = read_config(bert_family.FAMILY, _read_json(config_path), config_path)
        check_vocab_fits(config, len(check_vocab(vocab_path)), config_path, vocab_path)
        return
    family, config, path, config_path = _hf_family(directory)
    weights_path = hf_weights.weights_file(directory)
    shapes = hf_weights.read_shapes(weights_path, families.WEIGHT_PREFIXES)
    if shapes is not None:
        # Zero-stride stand-ins of each tensor's shape: the family's own mapping finds the word
        # embeddings (and any tensor missing) without a byte of the weights read.
        stand_ins = {name: np.broadcast_to(np.float32(0), shape) for name, shape in shapes.items()}
        _check_embedding_rows(
            config, family.map_weights(config, _getter(stand_ins, weights_path)), config_path, weights_path
        )
    # Built in a throwaway graph: an eager op here would start the TensorFlow runtime, and
    # MultiWorkerMirroredStrategy, created later, must configure collectives before it starts
    # (tensorflow/tensorflow#55178).
    with tf.Graph().as_default():
        tokens = family.preprocessor(path, True, 8).vocab_size  # parses the tokenizer's files
    check_vocab_fits(config, tokens, config_path, path)


def _hf_family(directory: str):
    """(family, config, tokenizer file path, config.json path) of a Hugging Face checkpoint
    directory."""
    config_path = os.path.join(directory, "config.json")
    raw = _read_json(config_path)
    family = families.family_of(raw, config_path)
    for name in family.tokenizer_files:
        _require(directory, name, f"(the {family.name} tokenizer's file)")
    return (
        family,
        read_config(family, raw, config_path),
        os.path.join(directory, family.tokenizer_files[0]),
        config_path,
    )


def _getter(tensors, path: str):
    """The `get(name, required=True)` a family's map_weights pulls `tensors` through."""

    def get(name, required=True):
        if name not in tensors and required:
            raise UserError(f"--encoder: {path} has no tensor {name}")
        return tensors.get(name)

    return get


def read_hf_checkpoint(directory: str) -> Checkpoint:
    """config.json + model.safetensors (or tf_model.h5) + the tokenizer's files, without torch."""
    family, config, tokenizer_file, config_path = _hf_family(directory)
    weights_path = hf_weights.weights_file(directory)
    tensors = hf_weights.read_weights(weights_path, families.WEIGHT_PREFIXES)
    weights = family.map_weights(config, _getter(tensors, weights_path))
    _check_embedding_rows(config, weights, config_path, weights_path)
    tokenizer_path = os.path.join(directory, "tokenizer_config.json")
    # Hugging Face's BertTokenizer lower-cases unless told otherwise.
    lower_case = _read_json(tokenizer_path).get("do_lower_case", True) if tf.io.gfile.exists(tokenizer_path) else True
    return Checkpoint(config, weights, tokenizer_file, lower_case, directory, family, config_path)


# config.json fields the native families read, whose bad values crash later (a division by
# zero, an embedding lookup or position out of range, a dropout rate of 1 at the first training
# step) or build a network that computes something else (a LayerNorm without epsilon divides
# padding's zero variance by zero; no layers). Each is checked when present: a family's own
# keys (ModernBERT's norm_eps, ELECTRA's embedding_size) appear in its configs only.
_AT_LEAST_ONE = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "embedding_size",
    "global_attn_every_n_layers",
    "local_attention",
    "dim",
    "n_layers",
    "n_heads",
    "hidden_dim",
)  # the last four: DistilBERT's
_AT_LEAST_ZERO = ("type_vocab_size", "pad_token_id")
_ABOVE_ZERO = ("layer_norm_eps", "norm_eps")
_DROPOUT_RATES = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "embedding_dropout",
    "attention_dropout",
    "mlp_dropout",
    "dropout",
)
# null: no padding token; embeddings as wide as the hidden size.
_MAY_BE_NULL = ("pad_token_id", "embedding_size")


def read_config(family: Family, raw: dict, path: str, **settings):
    """`family.read_config` of a config.json whose sizes, epsilon and rates are in range; a
    UserError naming the file and the first field that is not."""
    for key in (*_AT_LEAST_ONE, *_AT_LEAST_ZERO, *_ABOVE_ZERO, *_DROPOUT_RATES):
        if key not in raw or (raw[key] is None and key in _MAY_BE_NULL):
            continue
        problem = _out_of_range(key, raw[key])
        if problem:
            raise UserError(f"--encoder: {path}: {key} {json.dumps(raw[key])} {problem}")
    vocab_size, pad = raw.get("vocab_size"), raw.get("pad_token_id")
    # transformers refuses it too (its padding embedding row): the files disagree.
    if isinstance(vocab_size, int) and isinstance(pad, int) and pad >= vocab_size:
        raise UserError(f"--encoder: {path}: pad_token_id {pad} is not an id of the vocab_size {vocab_size} tokens")
    config = family.read_config(raw, path, **settings)
    if config.max_length < 1:  # RoBERTa's positions start after the padding id's
        raise UserError(
            f"--encoder: {path}: max_position_embeddings "
            f"{config.max_position_embeddings} leaves no position for text: "
            f"{family.name} counts positions from pad_token_id "
            f"{config.position_padding_id} + 1"
        )
    return config


def _out_of_range(key: str, value) -> str | None:
    """What is wrong with one field's value, or None."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if key in _AT_LEAST_ONE or key in _AT_LEAST_ZERO:
        low = 1 if key in _AT_LEAST_ONE else 0
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
            return f"is not a whole number >= {low}"
    elif key in _ABOVE_ZERO:
        if not (number and value > 0):
            return "is not a number above 0"
    elif not (number and 0 <= value < 1):
        return "is not a dropout rate in [0, 1)"
    return None


def check_vocab_fits(config, tokens: int, config_path: str, vocab_path: str) -> None:
    """A UserError when the tokenizer has ids from `config.vocab_size` up, which the word
    embeddings have no row for: the first batch holding one would fail in the embedding lookup.
    Fewer tokens than rows is common (ModernBERT pads its table to a multiple of 64)."""
    if tokens > config.vocab_size:
        raise UserError(
            f"--encoder: {config_path}: vocab_size {config.vocab_size} is smaller than the "
            f"{tokens} tokens of {vocab_path} (ids {config.vocab_size} to {tokens - 1} would "
            "have no embedding row): the tokenizer's files do not belong to these weights"
        )


def _check_embedding_rows(config, weights, config_path: str, weights_path: str) -> None:
    rows = weights["word_embeddings/embeddings"].shape[0]
    if rows != config.vocab_size:
        raise UserError(
            f"--encoder: {config_path}: vocab_size {config.vocab_size} does not "
            f"match the {rows} rows of the word embeddings in {weights_path}"
        )


def read_google_checkpoint(directory: str) -> Checkpoint:
    """Google's original TF1 BERT: bert_config.json + bert_model.ckpt.* + vocab.txt.

    Google's modeling.py computes GELU with the tanh approximation, whatever the config says.
    The checkpoint has no casing flag: like Google's run_classifier, the directory name tells
    ("cased_L-12_H-768_A-12" keeps case; anything else is lower-cased).
    """
    config_path = os.path.join(directory, "bert_config.json")
    config = read_config(bert_family.FAMILY, _read_json(config_path), config_path, gelu_approximate=True)
    prefix = os.path.join(directory, "bert_model.ckpt")
    reader = tf.train.load_checkpoint(prefix)
    available = reader.get_variable_to_shape_map()

    def get(name, required=True):
        if name not in available:
            if not required:
                return None
            raise UserError(f"--encoder: {prefix} has no variable {name}")
        return reader.get_tensor(name)

    name = os.path.basename(os.path.normpath(directory)).lower()
    lower_case = not re.search(r"(^|[^n])cased", name)
    return Checkpoint(
        config,
        bert_family.map_weights(config, get, hf_style=False),
        os.path.join(directory, "vocab.txt"),
        lower_case,
        directory,
        config_file=config_path,
    )


def _saved_model_objects(directory: str):
    """(object graph, asset file names, variable reader) of a SavedModel, without loading it.

    Reading the proto and the variables checkpoint directly avoids restoring every traced
    function: seconds and a second copy of the weights for BERT-base. `read(node_id)` returns a
    variable's value; the checkpoint's object graph numbers its nodes like the SavedModel's.
    """
    from tensorflow.core.protobuf import saved_model_pb2, trackable_object_graph_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(directory, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    meta_graph = saved_model.meta_graphs[0]
    assets = [asset.filename for asset in meta_graph.asset_file_def]
    reader = tf.train.load_checkpoint(os.path.join(directory, "variables", "variables"))
    checkpoint_graph = trackable_object_graph_pb2.TrackableObjectGraph()
    checkpoint_graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))

    def read(node_id):
        attributes = checkpoint_graph.nodes[node_id].attributes
        return reader.get_tensor(next(a.checkpoint_key for a in attributes if a.name == "VARIABLE_VALUE"))

    return meta_graph.object_graph_def, assets, read


def read_savedmodel_vocab(directory: str):
    """(vocab file, lower_case) from a TF-Hub BERT encoder's `vocab_file` and `do_lower_case`
    attributes (Model Garden's export_tfhub and this package's export set both), else (None, None).
    """
    graph, assets, read = _saved_model_objects(directory)
    children = {child.local_name: child.node_id for child in graph.nodes[0].children}
    if "vocab_file" not in children or "do_lower_case" not in children:
        return None, None
    vocab = graph.nodes[children["vocab_file"]]
    vocab_file = os.path.join(directory, "assets", assets[vocab.asset.asset_file_def_index])
    return vocab_file, bool(read(children["do_lower_case"]))


def savedmodel_weights(directory: str) -> dict[str, np.ndarray]:
    """{canonical name: value} of a SavedModel's encoder variables, whatever the family: a
    fine-tuned run's classifier (its encoder is rebuilt from the run's own --encoder)."""
    graph, _, read = _saved_model_objects(directory)
    return _encoder_variables(graph, read)


def _encoder_variables(graph, read) -> dict[str, np.ndarray]:
    weights = {}
    for node_id, node in enumerate(graph.nodes):
        if node.WhichOneof("kind") == "variable" and node.variable.trainable:
            name = canonical_name(node.variable.name)
            if name is not None:
                weights[name] = read(node_id)
    return weights


def read_hub_savedmodel(directory: str) -> Checkpoint:
    """A TF-Hub BERT encoder SavedModel's variables, placed by their Model Garden names.

    This package's exports carry their config as an `encoder_config_file` asset (exports
    written before issue #50 as `bert_config_file`, read the same: hub.CONFIG_ASSETS). For other
    SavedModels the architecture is read off the variable shapes, with Model Garden's settings
    (tanh-approximated GELU, LayerNorm epsilon 1e-12).
    """
    graph, assets, read = _saved_model_objects(directory)
    weights = _encoder_variables(graph, read)
    children = {child.local_name: graph.nodes[child.node_id] for child in graph.nodes[0].children}
    config_path = directory  # the variables' shapes are the config
    config_asset = next((children[name] for name in CONFIG_ASSETS if name in children), None)
    if config_asset is not None:  # this package's export, of any family
        config_index = config_asset.asset.asset_file_def_index
        config_path = os.path.join(directory, "assets", assets[config_index])
        raw = _read_json(config_path)
        config = families.BY_MODEL_TYPE[raw.get("family", "bert")].config_class(**raw)
    else:
        needed = (
            "word_embeddings/embeddings",
            "position_embedding/embeddings",
            "transformer/layer_0/self_attention/query/kernel",
            "transformer/layer_0/intermediate/kernel",
        )
        missing = [name for name in needed if name not in weights]
        if missing:
            raise UserError(
                f"--encoder {directory}: not a BERT encoder SavedModel the native backend can "
                f"read (no variable {missing[0]}); use --encoder-backend hub for it."
            )
        vocab_size, width = weights["word_embeddings/embeddings"].shape
        # Model Garden's BertEncoder (TF-Hub's ELECTRAs) projects narrower embeddings up.
        projection = weights.get("embedding_projection/kernel")
        config = EncoderConfig(
            vocab_size=vocab_size,
            hidden_size=width if projection is None else projection.shape[-1],
            embedding_size=None if projection is None else width,
            num_layers=len(
                {
                    re.match(r"transformer/layer_(\d+)/", name).group(1)
                    for name in weights
                    if name.startswith("transformer/layer_")
                }
            ),
            num_heads=weights["transformer/layer_0/self_attention/query/kernel"].shape[1],
            intermediate_size=weights["transformer/layer_0/intermediate/kernel"].shape[-1],
            max_position_embeddings=weights["position_embedding/embeddings"].shape[0],
            type_vocab_size=weights["type_embeddings/embeddings"].shape[0]
            if "type_embeddings/embeddings" in weights
            else 0,
            gelu_approximate=True,
        )
    vocab_file, lower_case = read_savedmodel_vocab(directory)
    return Checkpoint(
        config, weights, vocab_file, lower_case, directory, families.BY_MODEL_TYPE[config.family], config_path
    )
