"""BERT and ELECTRA: the WordPiece encoders the native network was first written for, and that
network, which RoBERTa, XLM-R and MPNet share (the config's switches set their differences).

The layout and the layer names follow Model Garden's BertEncoder
(official/nlp/modeling/networks/bert_encoder.py): embeddings -> LayerNorm -> [a projection to the
hidden size, when the embeddings are narrower, as in ELECTRA-Small] -> N post-LN transformer
blocks -> tanh pooler on [CLS] (trainer.modeling.encoders.layers holds the blocks).

ELECTRA's discriminator is a BERT encoder whose embeddings may be narrower than its blocks (an
"embeddings_project" maps them up) and which has no pooler. Hugging Face and Google's original
TF1 checkpoints name the same tensors differently; `map_weights` reads both.
"""

import numpy as np
import tf_keras

from trainer.errors import UserError
from trainer.modeling.encoders import layers
from trainer.modeling.encoders.layers import EncoderConfig
from trainer.modeling.encoders.models import Family
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor


def build(config: EncoderConfig, dtype: str | None = None, name: str = "bert_encoder") -> tf_keras.Model:
    """The encoder network: TF-Hub encoder inputs -> pooled/sequence/encoder outputs.

    `dtype=None` builds under the global policy (the trainer sets it first); exports pass
    "float32". Inputs are int32 [B, T] for any T up to `config.max_length`. BERT, ELECTRA,
    RoBERTa, XLM-R and MPNet are this network with the config's switches: the math they share
    is written once.
    """
    inputs = layers.encoder_inputs()
    x = _embeddings(config, inputs, dtype)
    attention_mask = layers.attention_mask(inputs["input_mask"])
    bias = _relative_bias(config, dtype)(x) if config.relative_attention_buckets else None
    encoder_outputs = []
    for index in range(config.num_layers):
        x = layers.TransformerEncoderBlock.for_layer(config, index, dtype)(
            x, attention_mask=attention_mask, attention_bias=bias
        )
        encoder_outputs.append(x)
    return layers.encoder_model(config, inputs, encoder_outputs, dtype, name)


def _embeddings(config: EncoderConfig, inputs: dict, dtype: str | None):
    """Word + position (+ token type) embeddings, LayerNorm, dropout (+ ELECTRA's projection)."""
    width = config.embedding_size or config.hidden_size
    word = tf_keras.layers.Embedding(
        config.vocab_size, width, embeddings_initializer=layers.initializer(), name="word_embeddings", dtype=dtype
    )(inputs["input_word_ids"])
    parts = [
        word,
        layers.PositionEmbedding(
            config.max_position_embeddings, config.position_padding_id, name="position_embedding", dtype=dtype
        )(word, input_mask=inputs["input_mask"]),
    ]
    if config.type_vocab_size:  # MPNet has no token types
        parts.append(
            tf_keras.layers.Embedding(
                config.type_vocab_size,
                width,
                embeddings_initializer=layers.initializer(),
                name="type_embeddings",
                dtype=dtype,
            )(inputs["input_type_ids"])
        )
    x = tf_keras.layers.Add(dtype=dtype)(parts)
    x = layers.LayerNorm(epsilon=config.layer_norm_eps, name="embeddings/layer_norm", dtype=dtype)(x)
    x = tf_keras.layers.Dropout(config.dropout_rate, dtype=dtype)(x)
    if config.embedding_size is not None:
        # After the LayerNorm and dropout, as in Hugging Face's ElectraModel (embeddings_project)
        # and Model Garden's BertEncoder (embedding_width < hidden_size).
        x = tf_keras.layers.EinsumDense(
            "abc,cd->abd",
            output_shape=(None, config.hidden_size),
            bias_axes="d",
            kernel_initializer=layers.initializer(),
            name="embedding_projection",
            dtype=dtype,
        )(x)
    return x


def _relative_bias(config: EncoderConfig, dtype: str | None):
    from trainer.modeling.encoders.relative_position import RelativePositionBias

    return RelativePositionBias(
        config.relative_attention_buckets, config.num_heads, name="relative_attention_bias", dtype=dtype
    )


def layers_from(encoder: tf_keras.Model, hidden, input_mask, first: int) -> dict:
    """A built encoder's transformer layers from `first` on, and its pooler, applied to the
    hidden states entering layer `first`: the encoder cut in two (trainer.serving.tflite
    quantizes the part after the cut). Every family's `layers_from` keeps this contract."""
    attention_mask = layers.attention_mask(input_mask)
    config = encoder.encoder_config
    bias = encoder.get_layer("relative_attention_bias")(hidden) if config.relative_attention_buckets else None
    for index in range(first, config.num_layers):
        hidden = encoder.get_layer(f"transformer/layer_{index}")(
            hidden, attention_mask=attention_mask, attention_bias=bias
        )
    return layers.pooled_outputs(encoder, hidden)


# (native sublayer, Hugging Face module, Google scope) of one transformer block.
_BLOCK_PARTS = [
    ("self_attention/query", "attention.self.query", "attention/self/query"),
    ("self_attention/key", "attention.self.key", "attention/self/key"),
    ("self_attention/value", "attention.self.value", "attention/self/value"),
    ("self_attention/attention_output", "attention.output.dense", "attention/output/dense"),
    ("self_attention_layer_norm", "attention.output.LayerNorm", "attention/output/LayerNorm"),
    ("intermediate", "intermediate.dense", "intermediate/dense"),
    ("output", "output.dense", "output/dense"),
    ("output_layer_norm", "output.LayerNorm", "output/LayerNorm"),
]
_EMBEDDING_PARTS = [
    ("word_embeddings/embeddings", "word_embeddings", "word_embeddings"),
    ("position_embedding/embeddings", "position_embeddings", "position_embeddings"),
    ("type_embeddings/embeddings", "token_type_embeddings", "token_type_embeddings"),
]


def map_weights(config: EncoderConfig, get, hf_style: bool = True) -> dict[str, np.ndarray]:
    """Pulls every encoder tensor through `get(name)`, in Hugging Face or Google naming.

    Hugging Face stores Linear weights as [out, in] and LayerNorm as weight/bias; Google stores
    [in, out] kernels and gamma/beta, as Keras does. `get(name, required=False)` returns None
    for a tensor the checkpoint lacks: only the pooler may be absent (ELECTRA has none; the
    encoder keeps a fresh one, see layers.pooler).
    """
    sep, prefix = (".", "") if hf_style else ("/", "bert/")

    def dense(native, module):
        if hf_style:
            return hf_dense(get, native, module)
        return {f"{native}/kernel": get(f"{module}/kernel"), f"{native}/bias": get(f"{module}/bias")}

    pooler = f"{prefix}pooler{sep}dense"
    has_pooler = get(f"{pooler}{sep}{'weight' if hf_style else 'kernel'}", required=False) is not None

    def layer_norm(native, module):
        if hf_style:
            return hf_layer_norm(get, native, module)
        return {f"{native}/gamma": get(f"{module}/gamma"), f"{native}/beta": get(f"{module}/beta")}

    weights = {}
    for native, hf_name, google_name in _EMBEDDING_PARTS:
        name = f"{hf_name}.weight" if hf_style else google_name
        weights[native] = get(f"{prefix}embeddings{sep}{name}")
    weights.update(layer_norm("embeddings/layer_norm", f"{prefix}embeddings{sep}LayerNorm"))
    if config.embedding_size is not None:
        weights.update(dense("embedding_projection", f"{prefix}embeddings_project"))
    if has_pooler:
        weights.update(dense("pooler_transform", pooler))
    for i in range(config.num_layers):
        block = f"{prefix}encoder.layer.{i}." if hf_style else f"{prefix}encoder/layer_{i}/"
        for native, hf_module, google_module in _BLOCK_PARTS:
            module = block + (hf_module if hf_style else google_module)
            reader = layer_norm if "layer_norm" in native else dense
            weights.update(reader(f"transformer/layer_{i}/{native}", module))
    return weights


def hf_dense(get, native: str, module: str) -> dict[str, np.ndarray]:
    """A PyTorch Linear ([out, in] weight) as a Keras kernel [in, out] and bias."""
    return {f"{native}/kernel": get(f"{module}.weight").T, f"{native}/bias": get(f"{module}.bias")}


def hf_layer_norm(get, native: str, module: str) -> dict[str, np.ndarray]:
    return {f"{native}/gamma": get(f"{module}.weight"), f"{native}/beta": get(f"{module}.bias")}


# Hugging Face `hidden_act` values of a BERT, by whether they are the tanh approximation.
HF_GELU_APPROXIMATE = {"gelu": False, "gelu_new": True, "gelu_pytorch_tanh": True, "gelu_fast": True}


def read_config(raw: dict, path: str, gelu_approximate: bool | None = None, **family_settings) -> EncoderConfig:
    """The EncoderConfig of a BERT-shaped config.json; `family_settings` are the EncoderConfig
    fields a family fixes itself (RoBERTa's positions, MPNet's relative bias)."""
    model_type = raw.get("model_type", "bert")
    position_type = raw.get("position_embedding_type", "absolute")
    activation = raw.get("hidden_act", "gelu")
    if position_type != "absolute" or activation not in HF_GELU_APPROXIMATE:
        raise UserError(
            f"--encoder: {path} describes a {model_type} model with hidden_act {activation} and "
            f"{position_type} positions; the native {model_type} encoder computes "
            f"{', '.join(HF_GELU_APPROXIMATE)} activations and absolute positions only."
        )
    # HF ElectraModel projects only when the widths differ (modeling_electra.py).
    embedding_size = raw.get("embedding_size") if model_type == "electra" else None
    try:
        config = EncoderConfig(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            num_layers=raw["num_hidden_layers"],
            num_heads=raw["num_attention_heads"],
            intermediate_size=raw["intermediate_size"],
            max_position_embeddings=raw.get("max_position_embeddings", 512),
            type_vocab_size=raw.get("type_vocab_size", 2),
            layer_norm_eps=raw.get("layer_norm_eps", 1e-12),
            gelu_approximate=(HF_GELU_APPROXIMATE[activation] if gelu_approximate is None else gelu_approximate),
            dropout_rate=raw.get("hidden_dropout_prob", 0.1),
            attention_dropout_rate=raw.get("attention_probs_dropout_prob", 0.1),
            embedding_size=embedding_size if embedding_size != raw["hidden_size"] else None,
            family=model_type,
            **family_settings,
        )
    except KeyError as missing:
        raise UserError(f"--encoder: {path} has no {missing} entry") from None
    if config.hidden_size % config.num_heads:
        raise UserError(
            f"--encoder: {path}: hidden_size {config.hidden_size} is not a "
            f"multiple of num_attention_heads {config.num_heads}"
        )
    return config


# The network's fields of a Family record, for every family that shares it (`**NETWORK`).
NETWORK = dict(config_class=EncoderConfig, build=build, layers_from=layers_from, gradient_checkpointing=True)
FAMILY = Family(
    name="BERT",
    model_types=("bert", "electra"),
    tokenizer_files=("vocab.txt",),
    read_config=read_config,
    map_weights=map_weights,
    preprocessor=WordPiecePreprocessor,
    weight_prefixes=("bert", "electra"),
    **NETWORK,
)
