"""One module per encoder family: how its Hugging Face config, weights and tokenizer files
become the native network's BertConfig, canonical weights and preprocessor. Which family a
checkpoint belongs to is decided in one place, trainer.modeling.encoders.families."""
import dataclasses
from typing import Callable, Dict, Tuple

import numpy as np

# Not `import bert`: that name would hide the models.bert family module in this package.
from trainer.modeling.encoders import bert as network


@dataclasses.dataclass(frozen=True)
class Family:
    name: str  # what the model card and errors call it
    model_types: Tuple[str, ...]  # config.json "model_type" values it reads
    tokenizer_files: Tuple[str, ...]  # beside config.json; all required
    # (config.json as a dict, its path) -> BertConfig, UserErrors for settings it cannot compute
    read_config: Callable
    # (BertConfig, get(name, required=True)) -> {canonical name: array}, from PyTorch names
    map_weights: Callable[..., Dict[str, np.ndarray]]
    # (path of tokenizer_files[0], lower_case, seq_length) -> the preprocessor layer
    preprocessor: Callable
    # Hugging Face's prefix of the encoder inside its task models ("roberta." in
    # RobertaForMaskedLM): stripped when the weights are read.
    weight_prefixes: Tuple[str, ...] = ()
    # The network, for families whose math is not the shared BERT network's: its config class
    # (a frozen dataclass with a `family` field = the model_type, and `max_length`), the
    # builder (config, dtype=None) -> a tf_keras.Model with the TF-Hub encoder interface and a
    # `bert_config` attribute, and the cut the int8 copy makes (bert.layers_from's contract).
    config_class: type = network.BertConfig
    build: Callable = network.build_bert_encoder
    layers_from: Callable = network.layers_from
