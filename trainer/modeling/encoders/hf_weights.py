"""The weight files of a Hugging Face checkpoint directory, as {PyTorch module name: array}.

Two formats are read without torch or transformers: `model.safetensors` (safetensors' numpy
API) and `tf_model.h5` (Transformers' TensorFlow weights, read with h5py, which TensorFlow
installs). Both come back in the PyTorch names of the bare encoder ("embeddings.LayerNorm.weight",
"encoder.layer.0.attention.self.query.weight" with Linear weights [out, in]), so one mapping
(models.bert.map_weights) places either. Older repositories such as
microsoft/MiniLM-L12-H384-uncased and google/electra-small-discriminator hold tf_model.h5 and
pytorch_model.bin but no model.safetensors on their main branch.
"""

import io
import os
import re

import numpy as np
import tensorflow as tf

from trainer.errors import UserError

WEIGHT_FILES = ("model.safetensors", "tf_model.h5")
PYTORCH_FILE = "pytorch_model.bin"

# The encoder of a task model (BertForSequenceClassification, ElectraForPreTraining, ...) sits
# under its model type's attribute: "bert." / "electra." in PyTorch names, "bert/" / "electra/"
# in TensorFlow ones (each family names its own: families.WEIGHT_PREFIXES). A bare BertModel
# or ElectraModel has no prefix. tf_model.h5 files are read for BERT and ELECTRA only.
MODEL_PREFIXES = ("bert", "electra")
# The first component of every encoder tensor name, after that prefix.
_ENCODER_ROOTS = ("embeddings", "embeddings_project", "encoder", "pooler")


def weights_file(directory: str) -> str | None:
    """The path of the directory's first weight file in WEIGHT_FILES order, else None."""
    for name in WEIGHT_FILES:
        path = os.path.join(directory, name)
        if tf.io.gfile.exists(path):
            return path
    return None


def pytorch_only_message(source: str, load_from: str) -> str:
    """What to do with a checkpoint whose only weights are a pickled pytorch_model.bin."""
    return (
        f"{source} holds only {PYTORCH_FILE}, a pickled PyTorch checkpoint, which is not read "
        "here (it needs torch). Convert it once where transformers and torch are installed: "
        f"`AutoModel.from_pretrained({load_from!r}).save_pretrained(OUT, safe_serialization=True)`"
        ", copy vocab.txt and tokenizer_config.json into OUT, then pass --encoder OUT"
    )


def read_weights(path: str, prefixes=MODEL_PREFIXES) -> dict[str, np.ndarray]:
    """{PyTorch name without the model prefix: array} of a model.safetensors or tf_model.h5."""
    tensors = _read_h5(path) if path.endswith(".h5") else _read_safetensors(path)
    return {_strip_prefix(name, prefixes): value for name, value in tensors.items()}


def read_shapes(path: str, prefixes=MODEL_PREFIXES) -> dict[str, tuple[int, ...]] | None:
    """{PyTorch name without the model prefix: shape} from a local model.safetensors' header,
    without reading a tensor (a second, whatever the checkpoint's size); None for tf_model.h5
    and for remote files, whose shapes are checked when the weights are read."""
    from safetensors import SafetensorError, safe_open

    if path.endswith(".h5") or "://" in path:
        return None
    try:
        with safe_open(path, framework="numpy") as f:
            return {_strip_prefix(name, prefixes): tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except SafetensorError as error:
        raise UserError(f"--encoder: {path} is not a readable safetensors file ({error})") from None


def _strip_prefix(name: str, prefixes) -> str:
    head, _, rest = name.partition(".")
    return rest if head in prefixes and rest else name


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load, load_file

    if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as f:
            return load(f.read())
    return load_file(path)  # memory-mapped: 0.07 s for MiniLM's 87 MiB, GFile.read() 0.7-1.6 s


def _read_h5(path: str) -> dict[str, np.ndarray]:
    """Transformers' TF weights: a Keras 2 `save_weights` file, one group per top-level layer
    holding datasets named by variable, e.g.
    "bert/tf_bert_model/bert/encoder/layer_._0/attention/self/query/kernel:0"
    (transformers' modeling_tf_utils.load_tf_weights reads them the same way)."""
    import h5py

    if "://" in path:
        with tf.io.gfile.GFile(path, "rb") as f:
            source = io.BytesIO(f.read())
    else:
        source = path
    tensors = {}

    def visit(name, item):
        torch_name = _torch_name(name) if isinstance(item, h5py.Dataset) else None
        if torch_name is not None:
            # Keras kernels are [in, out]; PyTorch Linear weights [out, in] (a free view).
            tensors[torch_name] = item[()].T if name.endswith("/kernel:0") else item[()]

    try:
        with h5py.File(source, "r") as f:
            f.visititems(visit)
    except OSError as error:
        raise UserError(f"--encoder: {path} is not a readable HDF5 file ({error})") from None
    return tensors


def _torch_name(h5_name: str) -> str | None:
    """ ".../bert/encoder/layer_._0/output/dense/kernel:0" -> "encoder.layer.0.output.dense.weight";
    None for tensors outside the encoder (task heads, ELECTRA's discriminator_predictions)."""
    parts = h5_name.split(":")[0].split("/")
    start = next(
        (i for i in range(1, len(parts)) if parts[i - 1] in MODEL_PREFIXES and parts[i] in _ENCODER_ROOTS), None
    )
    if start is None:
        return None
    *module, leaf = parts[start:]
    # Dense kernels and LayerNorm gamma/beta; embeddings are "weight" (word) or "embeddings".
    leaf = {"kernel": "weight", "gamma": "weight", "beta": "bias", "embeddings": "weight"}.get(leaf, leaf)
    return re.sub(r"layer_\._(\d+)", r"layer.\1", ".".join([*module, leaf]))
