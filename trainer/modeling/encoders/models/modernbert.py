"""ModernBERT (Warner et al. 2024, arXiv:2412.13663; answerdotai/ModernBERT-base and -large).

Read against Hugging Face's modeling_modernbert.py (its eager/SDPA path, the one that runs on
CPU): token embeddings -> LayerNorm (no position embeddings, no token types) -> N pre-LN blocks
-> a final LayerNorm. A block is x += Wo(attention(norm(x))), x += Wo'(gelu(a) * g) with
a, g = split(Wi(norm(x))) (GeGLU); the first block has no attention norm (the embeddings' norm
precedes it). Attention projects query, key and value with one fused matrix and rotates query
and key by their positions (rotary.py). Every `global_attn_every_n_layers`-th layer (from
layer 0) attends globally with rotary theta 160,000; the others attend within +-local_attention/2
tokens, theta 10,000. Norms and linears have no biases (norm_bias, attention_bias, mlp_bias
false in every published checkpoint; others are refused). ModernBertModel has no pooler: the
encoder keeps a fresh one (layers.FRESH_WHEN_ABSENT), as ELECTRA does.

Variables are named under the shared roots (layers.canonical_name): word_embeddings,
embeddings/layer_norm, transformer/layer_{i}/..., pooler_transform. The final norm belongs to
the last block ("transformer/layer_{N-1}/final_layer_norm"): layer-wise learning-rate decay then
gives it the top layer's rate, and the last encoder output is the sequence output.

The tokenizer is byte-level BPE from tokenizer.json (tokenizers/byte_pair.py), packed
`[CLS] a [SEP] (b [SEP])` with no token types (ModernBERT's tokenizer returns none).
"""

import dataclasses
import math
import os

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.errors import UserError
from trainer.modeling.encoders import depth, layers, rotary
from trainer.modeling.encoders.models import Family
from trainer.modeling.encoders.models.bert import HF_GELU_APPROXIMATE
from trainer.modeling.encoders.preprocessing import SpecialTokens, SubwordPreprocessor
from trainer.modeling.encoders.tokenizers.byte_pair import BytePairTokenizer, read_json

GLOBAL, LOCAL = "full_attention", "sliding_attention"  # Hugging Face's layer_types values


@dataclasses.dataclass(frozen=True)
class ModernBertConfig(layers.TransformerShape):
    # Each layer's attention: GLOBAL or LOCAL (Hugging Face's config.layer_types).
    layer_types: tuple[str, ...]
    max_position_embeddings: int = 8192
    layer_norm_eps: float = 1e-5
    gelu_approximate: bool = False
    local_attention: int = 128  # a LOCAL layer's window: local_attention // 2 tokens each side
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    dropout_rate: float = 0.0  # after the embeddings' norm (embedding_dropout)
    attention_dropout_rate: float = 0.0  # on attention probabilities and attention's output
    mlp_dropout_rate: float = 0.0  # inside the GeGLU, before Wo
    family: str = "modernbert"

    def __post_init__(self):
        # JSON (the exported encoder_config_file asset) gives a list back.
        object.__setattr__(self, "layer_types", tuple(self.layer_types))


def read_config(raw: dict, path: str) -> ModernBertConfig:
    """The config of a ModernBERT config.json, in transformers 4's layout
    (global_attn_every_n_layers, global/local_rope_theta) or 5's (layer_types, rope_parameters)."""
    unsupported = [f"{key} true" for key in ("norm_bias", "attention_bias", "mlp_bias") if raw.get(key)]
    activation = raw.get("hidden_activation", "gelu")
    if activation not in HF_GELU_APPROXIMATE:
        unsupported.append(f"hidden_activation {activation}")
    try:
        layers = raw["num_hidden_layers"]
        every = raw.get("global_attn_every_n_layers", 3)
        layer_types = tuple(raw.get("layer_types") or (LOCAL if i % every else GLOBAL for i in range(layers)))
        thetas = _rope_thetas(raw, unsupported)
        config = ModernBertConfig(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            num_layers=layers,
            num_heads=raw["num_attention_heads"],
            intermediate_size=raw["intermediate_size"],
            layer_types=layer_types,
            max_position_embeddings=raw.get("max_position_embeddings", 8192),
            layer_norm_eps=raw.get("norm_eps", 1e-5),
            gelu_approximate=HF_GELU_APPROXIMATE.get(activation, False),
            local_attention=raw.get("local_attention", 128),
            **thetas,
            dropout_rate=raw.get("embedding_dropout", 0.0),
            attention_dropout_rate=raw.get("attention_dropout", 0.0),
            mlp_dropout_rate=raw.get("mlp_dropout", 0.0),
        )
    except KeyError as missing:
        raise UserError(f"--encoder: {path} has no {missing} entry") from None
    if len(layer_types) != layers or set(layer_types) - {GLOBAL, LOCAL}:
        unsupported.append(f"layer_types {list(layer_types)} for {layers} layers")
    if unsupported:
        raise UserError(
            f"--encoder: {path} describes a modernbert model with "
            f"{', '.join(unsupported)}; the native modernbert encoder computes bias-free "
            f"norms and linears, {', '.join(HF_GELU_APPROXIMATE)} activations, default "
            f"rotary positions and {GLOBAL}/{LOCAL} layers only."
        )
    if config.hidden_size % config.num_heads or config.head_size % 2:
        raise UserError(
            f"--encoder: {path}: hidden_size {config.hidden_size} is not a multiple "
            f"of num_attention_heads {config.num_heads} with an even head size"
        )
    return config


def _rope_thetas(raw: dict, unsupported: list) -> dict[str, float]:
    """Rotary theta per attention kind, from rope_parameters (transformers 5) or the older keys."""
    parameters = raw.get("rope_parameters") or {}
    thetas = {}
    for kind, name, default in ((GLOBAL, "global_rope_theta", 160_000.0), (LOCAL, "local_rope_theta", 10_000.0)):
        settings = parameters.get(kind) or {}
        if settings.get("rope_type", "default") != "default":
            unsupported.append(f"{kind} rope_type {settings['rope_type']}")
        thetas[name] = float(settings.get("rope_theta", raw.get(name, default)))
    return thetas


class RotaryAttention(tf_keras.layers.Layer):
    """Self-attention with a fused, bias-free query/key/value projection, rotary positions and,
    for a local layer, a band of +-window keys around each query.

    The band is a mask over positions, added to the padding mask: it works for any T (length
    buckets, static shapes, XLA) and keeps the layer one set of matmuls. The softmax runs in
    float32 under every policy, as Hugging Face's eager attention does."""

    def __init__(
        self, num_heads: int, head_size: int, rope_theta: float, window: int | None, dropout_rate: float, **kwargs
    ):
        super().__init__(**kwargs)
        self._settings = dict(
            num_heads=num_heads, head_size=head_size, rope_theta=rope_theta, window=window, dropout_rate=dropout_rate
        )
        hidden, policy = num_heads * head_size, self.dtype_policy
        self.qkv = _dense(3 * hidden, "qkv", policy)
        self.attention_output = _dense(hidden, "attention_output", policy)
        self.probability_dropout = tf_keras.layers.Dropout(dropout_rate, dtype=policy)
        self.output_dropout = tf_keras.layers.Dropout(dropout_rate, dtype=policy)

    def call(self, inputs, attention_mask, training=None):
        settings = self._settings
        batch, length = tf.shape(inputs)[0], tf.shape(inputs)[1]
        heads = [batch, length, settings["num_heads"], settings["head_size"]]
        query, key, value = (tf.reshape(part, heads) for part in tf.split(self.qkv(inputs), 3, axis=-1))
        cos, sin = rotary.tables(length, settings["head_size"], settings["rope_theta"])
        query, key = rotary.rotate(query, cos, sin), rotary.rotate(key, cos, sin)
        scores = tf.cast(tf.einsum("btnd,bsnd->bnts", query, key), tf.float32)
        scores = scores / math.sqrt(settings["head_size"]) + _mask_bias(attention_mask, length, settings["window"])
        probabilities = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        probabilities = self.probability_dropout(probabilities, training=training)
        attended = tf.einsum("bnts,bsnd->btnd", probabilities, value)
        attended = tf.reshape(attended, [batch, length, settings["num_heads"] * settings["head_size"]])
        return self.output_dropout(self.attention_output(attended), training=training)

    def get_config(self):
        return {**super().get_config(), **self._settings}


def _mask_bias(attention_mask, length, window: int | None):
    """float32 [B, 1, 1|T, T]: 0 where a query may attend a key, -1e9 elsewhere. Keys must be
    real tokens ([B, 1, T] mask); with `window`, also within `window` positions of the query
    (|q - k| <= window, Hugging Face's sliding_window_bidirectional_overlay). A query with no
    key left (padding far from any token) attends uniformly: finite, and never read."""
    bias = (tf.cast(tf.expand_dims(attention_mask, 1), tf.float32) - 1.0) * 1e9
    if window is not None:
        positions = tf.range(length)
        distance = tf.abs(tf.expand_dims(positions, 1) - tf.expand_dims(positions, 0))
        bias += (tf.cast(distance <= window, tf.float32) - 1.0) * 1e9
    return bias


def _dense(width: int, name: str, policy) -> tf_keras.layers.EinsumDense:
    return tf_keras.layers.EinsumDense(
        "abc,cd->abd", output_shape=(None, width), kernel_initializer=layers.initializer(), name=name, dtype=policy
    )


class ModernBertBlock(tf_keras.layers.Layer):
    """Pre-LN block: x += attention(norm(x)); x += Wo(gelu(a) * g), a, g = split(Wi(norm(x))).

    `first`: no attention norm (Identity in Hugging Face's layer 0). `last`: ends with the
    model's final norm."""

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        intermediate_size: int,
        layer_norm_eps: float,
        gelu_approximate: bool,
        rope_theta: float,
        window: int | None,
        attention_dropout_rate: float,
        mlp_dropout_rate: float,
        first: bool,
        last: bool,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._settings = dict(
            num_heads=num_heads,
            head_size=head_size,
            intermediate_size=intermediate_size,
            layer_norm_eps=layer_norm_eps,
            gelu_approximate=gelu_approximate,
            rope_theta=rope_theta,
            window=window,
            attention_dropout_rate=attention_dropout_rate,
            mlp_dropout_rate=mlp_dropout_rate,
            first=first,
            last=last,
        )
        # Sublayers get this block's policy explicitly (see layers.TransformerEncoderBlock).
        policy = self.dtype_policy

        def norm(name):
            return layers.LayerNorm(epsilon=layer_norm_eps, center=False, name=name, dtype=policy)

        self.attention_layer_norm = None if first else norm("attention_layer_norm")
        self.self_attention = RotaryAttention(
            num_heads, head_size, rope_theta, window, attention_dropout_rate, name="self_attention", dtype=policy
        )
        self.mlp_layer_norm = norm("mlp_layer_norm")
        self.intermediate = _dense(2 * intermediate_size, "intermediate", policy)
        self.mlp_dropout = tf_keras.layers.Dropout(mlp_dropout_rate, dtype=policy)
        self.output_dense = _dense(num_heads * head_size, "output", policy)
        self.final_layer_norm = norm("final_layer_norm") if last else None

    def call(self, inputs, attention_mask, training=None):
        normed = inputs if self.attention_layer_norm is None else self.attention_layer_norm(inputs)
        x = inputs + self.self_attention(normed, attention_mask=attention_mask, training=training)
        gate_input, gate = tf.split(self.intermediate(self.mlp_layer_norm(x)), 2, axis=-1)
        inner = layers.gelu(gate_input, approximate=self._settings["gelu_approximate"]) * gate
        x = x + self.output_dense(self.mlp_dropout(inner, training=training))
        return x if self.final_layer_norm is None else self.final_layer_norm(x)

    def get_config(self):
        return {**super().get_config(), **self._settings}


def _block(config: ModernBertConfig, index: int, dtype) -> ModernBertBlock:
    local = config.layer_types[index] == LOCAL
    return ModernBertBlock(
        num_heads=config.num_heads,
        head_size=config.head_size,
        intermediate_size=config.intermediate_size,
        layer_norm_eps=config.layer_norm_eps,
        gelu_approximate=config.gelu_approximate,
        rope_theta=config.local_rope_theta if local else config.global_rope_theta,
        window=config.local_attention // 2 if local else None,
        attention_dropout_rate=config.attention_dropout_rate,
        mlp_dropout_rate=config.mlp_dropout_rate,
        first=index == 0,
        last=index == config.num_layers - 1,
        name=f"transformer/layer_{index}",
        dtype=dtype,
    )


def build(config: ModernBertConfig, dtype: str | None = None, name: str = "modernbert_encoder") -> tf_keras.Model:
    """The encoder network with the TF-Hub encoder interface (layers.encoder_model's
    contract); input_type_ids is taken and unused: ModernBERT has no token types."""
    inputs = layers.encoder_inputs()
    x = tf_keras.layers.Embedding(
        config.vocab_size,
        config.hidden_size,
        embeddings_initializer=layers.initializer(),
        name="word_embeddings",
        dtype=dtype,
    )(inputs["input_word_ids"])
    x = layers.LayerNorm(epsilon=config.layer_norm_eps, center=False, name="embeddings/layer_norm", dtype=dtype)(x)
    x = tf_keras.layers.Dropout(config.dropout_rate, dtype=dtype)(x)
    attention_mask = layers.attention_mask(inputs["input_mask"])
    encoder_outputs = []
    for index in range(config.num_layers):
        x = _block(config, index, dtype)(x, attention_mask=attention_mask)
        encoder_outputs.append(x)
    return layers.encoder_model(config, inputs, encoder_outputs, dtype, name)


def layers_from(encoder: tf_keras.Model, hidden, input_mask, first: int) -> dict:
    """Layers `first`.. (the final norm with the last) and the pooler on the hidden states
    entering layer `first` (Family.layers_from's contract)."""
    attention_mask = layers.attention_mask(input_mask)
    for index in range(first, encoder.encoder_config.num_layers):
        hidden = encoder.get_layer(f"transformer/layer_{index}")(hidden, attention_mask=attention_mask)
    return layers.pooled_outputs(encoder, hidden)


# (native sublayer, Hugging Face module) of one ModernBertEncoderLayer's linears.
_LINEARS = [
    ("self_attention/qkv", "attn.Wqkv"),
    ("self_attention/attention_output", "attn.Wo"),
    ("intermediate", "mlp.Wi"),
    ("output", "mlp.Wo"),
]


def map_weights(config: ModernBertConfig, get) -> dict[str, np.ndarray]:
    """ModernBertModel's tensors (PyTorch Linear weights [out, in]) under the native names."""
    weights = {
        "word_embeddings/embeddings": get("embeddings.tok_embeddings.weight"),
        "embeddings/layer_norm/gamma": get("embeddings.norm.weight"),
    }
    for i in range(config.num_layers):
        native, module = f"transformer/layer_{i}/", f"layers.{i}."
        for name, hf_name in _LINEARS:
            weights[f"{native}{name}/kernel"] = get(f"{module}{hf_name}.weight").T
        weights[f"{native}mlp_layer_norm/gamma"] = get(f"{module}mlp_norm.weight")
        if i:
            weights[f"{native}attention_layer_norm/gamma"] = get(f"{module}attn_norm.weight")
    weights[f"transformer/layer_{config.num_layers - 1}/final_layer_norm/gamma"] = get("final_norm.weight")
    return weights


def _special_tokens(tokenizer_file: str) -> SpecialTokens:
    """[CLS]/[SEP] as tokenizer.json's post-processor places them: TemplateProcessing
    `C $A S` and `C $A S $B S`, or BertProcessing; a UserError for any other layout, whose ids
    would silently differ from Hugging Face's. The padding token is tokenizer_config.json's,
    as Hugging Face's PreTrainedTokenizerFast takes it. No token types: ModernBERT's tokenizer
    returns none."""
    processor = read_json(tokenizer_file).get("post_processor") or {}
    kind = processor.get("type")
    if kind == "BertProcessing":
        start, end = processor["cls"][0], processor["sep"][0]
    elif kind == "TemplateProcessing":
        single, pair = (_template(processor.get(key) or []) for key in ("single", "pair"))
        start, end = (single[0], single[-1]) if len(single) == 3 else (None, None)
        if single != [start, "$A", end] or pair != [start, "$A", end, "$B", end]:
            raise UserError(
                f"{tokenizer_file}: the post-processor packs {' '.join(single)} / "
                f"{' '.join(pair)}; the modernbert preprocessor packs "
                "[CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP] only"
            )
    else:
        raise UserError(
            f"{tokenizer_file}: post_processor {kind} adds no [CLS]/[SEP]; the "
            "modernbert preprocessor needs TemplateProcessing or BertProcessing"
        )
    config_path = os.path.join(os.path.dirname(tokenizer_file), "tokenizer_config.json")
    pad = (read_json(config_path).get("pad_token") if tf.io.gfile.exists(config_path) else None) or "[PAD]"
    pad = pad.get("content") if isinstance(pad, dict) else pad
    return SpecialTokens(pad=pad, unknown="[UNK]", start=start, end=end, typed_pairs=False)


def _template(pieces: list) -> list:
    """["[CLS]", "$A", "[SEP]"] of a TemplateProcessing template (type ids do not matter:
    ModernBERT's tokenizer returns none)."""
    return [f"${piece['Sequence']['id']}" if "Sequence" in piece else piece["SpecialToken"]["id"] for piece in pieces]


def _preprocessor(tokenizer_file: str, lower_case: bool, seq_length: int):
    """Byte-level BPE in the graph, so an export still takes raw strings; it keeps case, so
    `lower_case` (a WordPiece setting) has no say."""
    return SubwordPreprocessor(
        BytePairTokenizer.from_tokenizer_json(tokenizer_file), _special_tokens(tokenizer_file), seq_length
    )


def shallower(config: ModernBertConfig, weights: dict[str, np.ndarray], indices):
    """--encoder-layers: each kept layer keeps its attention kind (global or local), and the
    final norm, which the last block holds, stays with the new last block."""
    final = f"transformer/layer_{config.num_layers - 1}/final_layer_norm/gamma"
    kept, renumbered = depth.shallower(config, weights, indices)
    renumbered[f"transformer/layer_{len(indices) - 1}/final_layer_norm/gamma"] = weights[final]
    return (dataclasses.replace(kept, layer_types=tuple(config.layer_types[i] for i in indices)), renumbered)


FAMILY = Family(
    name="ModernBERT",
    model_types=("modernbert",),
    tokenizer_files=("tokenizer.json",),
    read_config=read_config,
    map_weights=map_weights,
    preprocessor=_preprocessor,
    weight_prefixes=("model",),
    config_class=ModernBertConfig,
    build=build,
    layers_from=layers_from,
    shallower=shallower,
)
