"""One module per encoder family: how its Hugging Face config, weights and tokenizer files
become the native network's config, canonical weights and preprocessor, and the network itself
(trainer.modeling.encoders.layers holds the blocks they share). Which family a checkpoint
belongs to is decided in one place, trainer.modeling.encoders.families."""

import dataclasses
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Family:
    name: str  # what the model card and errors call it
    model_types: tuple[str, ...]  # config.json "model_type" values it reads
    tokenizer_files: tuple[str, ...]  # beside config.json; all required
    # (config.json as a dict, its path) -> config_class, UserErrors for settings it cannot compute
    read_config: Callable
    # (config, get(name, required=True)) -> {canonical name: array}, from PyTorch names
    map_weights: Callable[..., dict[str, np.ndarray]]
    # (path of tokenizer_files[0], lower_case, seq_length) -> the preprocessor layer
    preprocessor: Callable
    # The network's config class: a frozen dataclass with `family` (the model_type) and
    # `max_length` fields, rebuilt from its JSON (an export's encoder_config_file asset).
    config_class: type
    # (config, dtype=None) -> a tf_keras.Model keeping layers.encoder_model's contract: the
    # TF-Hub encoder interface, `encoder_config`, variables under layers.NAME_ROOTS.
    build: Callable
    # (built network, hidden states entering layer `first`, input mask, first) -> its pooled
    # and sequence outputs: the encoder cut in two, the part after the cut quantized in the
    # int8 copy (trainer.serving.tflite).
    layers_from: Callable
    # Hugging Face's prefix of the encoder inside its task models ("roberta." in
    # RobertaForMaskedLM): stripped when the weights are read.
    weight_prefixes: tuple[str, ...] = ()
    # Whether its blocks are layers.TransformerEncoderBlock, which recompute their activations
    # in the backward pass (--gradient-checkpointing).
    gradient_checkpointing: bool = False
    # --encoder-layers: (config, canonical weights, kept layer indices) -> (config, weights) of
    # the shallower encoder, for a family whose config says something per layer; None: the
    # layers are alike (depth.shallower).
    shallower: Callable | None = None
