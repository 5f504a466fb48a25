"""DeBERTa-v3 (He et al. 2021; microsoft/deberta-v3-*, mdeberta-v3-base): Hugging Face's
`deberta-v2` model type, a post-LN BERT block whose attention adds disentangled relative-position
terms, with no absolute positions and no token types.

Read against transformers' modeling_deberta_v2.py:
- DebertaV2Embeddings: word embeddings (-> embed_proj, no bias, when narrower) -> LayerNorm,
  times the mask; no position or type embeddings in any v3 checkpoint (refused otherwise);
- DebertaV2Encoder: one table of 2 * position_buckets relative-position embeddings, LayerNorm'd
  once (norm_rel_ebd "layer_norm") and shared by every layer;
- DisentangledSelfAttention with share_att_key and pos_att_type [p2c, c2p]: content->content
  q.k, content->position q.Wk(r) and position->content k.Wq(r) at the log-bucketed distance of
  query and key, all three scaled by 1/sqrt(3 * head_size);
- no pooler in DebertaV2Model (the ContextPooler belongs to the task models): the native
  encoder's pooler starts fresh, as ELECTRA's (layers.pooler).
Its tokenizer is SentencePiece (spm.model), packed `[CLS] a [SEP] b [SEP]`.
"""

import dataclasses
import json
import math
import os

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.errors import UserError
from trainer.modeling.encoders import layers
from trainer.modeling.encoders.models import Family, bert
from trainer.modeling.encoders.preprocessing import SpecialTokens, SubwordPreprocessor
from trainer.modeling.encoders.tokenizers.sentencepiece import (
    METASPACE,
    SentencePieceLayout,
    SentencePieceTokenizer,
)

MODEL_TYPE = "deberta-v2"
RELATIVE = "embeddings/relative_positions"  # the shared table's layer (root "embeddings")
# DebertaV2TokenizerFast's template is BERT's: [CLS] a [SEP] b [SEP], b's type ids 1.
SPECIAL = SpecialTokens("[PAD]", "[UNK]", "[CLS]", "[SEP]")


def _vocabulary(pieces: list):
    """DebertaV2Tokenizer's ids are spm.model's, [MASK] appended when the model lacks it."""
    return ([*pieces, "[MASK]"] if "[MASK]" not in pieces else pieces), None


# spm.model: [PAD], [CLS], [SEP], [UNK] first; normalized by the model's own map, as transformers
# 5.25.0 and later normalize it (sentencepiece.METASPACE). DeBERTa's do_lower_case and
# split_by_punct (off in the published v3 checkpoints) are refused (_preprocessor).
SENTENCEPIECE = SentencePieceLayout(
    family="deberta-v3",
    specials=("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"),
    leading_pieces=("[PAD]", "[CLS]", "[SEP]", "[UNK]"),
    vocabulary=_vocabulary,
    normalizer=METASPACE,
)


@dataclasses.dataclass(frozen=True)
class DebertaConfig(layers.TransformerShape):
    max_position_embeddings: int = 512
    # Relative distances beyond position_buckets / 2 share log-spaced buckets up to
    # max_relative_positions; position_buckets <= 0: one row per distance, no buckets.
    position_buckets: int = 256
    max_relative_positions: int = 512
    layer_norm_eps: float = 1e-7
    gelu_approximate: bool = False
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.1
    embedding_size: int | None = None  # narrower word embeddings, projected up (embed_proj)
    family: str = MODEL_TYPE

    @property
    def attention_span(self) -> int:
        """Half the relative-position table's rows: distances -span..span-1 have a row each."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative_positions


def relative_position_rows(config: DebertaConfig) -> np.ndarray:
    """int32 [2L - 1]: the table row of query i and key j at index i - j + L - 1 (L:
    config.max_length), as DisentangledSelfAttention computes c2p_pos (p2c's is the same row,
    the buckets being odd in the distance).

    make_log_bucket_position's float32 arithmetic, step by step (torch divides an int64 tensor
    into float32 and takes float32 logs), so the ceiling lands where PyTorch's does."""
    span, distance = config.attention_span, np.arange(1 - config.max_length, config.max_length)
    if config.position_buckets > 0:
        mid = config.position_buckets // 2
        near = (distance < mid) & (distance > -mid)
        absolute = np.where(near, mid - 1, np.abs(distance)).astype(np.float32)
        scale = np.log(np.float32((config.max_relative_positions - 1) / mid))
        log_position = np.ceil(np.log(absolute / np.float32(mid)) / scale * np.float32(mid - 1)) + mid
        distance = np.where(absolute <= mid, distance, log_position * np.sign(distance)).astype(np.int64)
    return np.clip(distance + span, 0, 2 * span - 1).astype(np.int32)


class RelativePositions(tf_keras.layers.Layer):
    """hidden [B, T, H] -> (rows [W, H], index [T, T]): the LayerNorm'd relative-position
    embeddings the batch's distances reach, and the row each (query, key) pair reads.

    With T below the span only rows span-T .. span+T-1 can be read (no bucket is farther than
    its distance), so the c2p/p2c products cover 2T rows, not the whole table (512 rows for
    DeBERTa-v3): 8x less of that work at T = 32."""

    def __init__(self, config: dict, **kwargs):
        super().__init__(**kwargs)
        self.config = dict(config)
        settings = DebertaConfig(**self.config)
        self.span = settings.attention_span
        self.max_length = settings.max_length
        self.rows = relative_position_rows(settings)
        distance = np.abs(np.arange(1 - self.max_length, self.max_length))
        self.windowed = bool(np.all(np.abs(self.rows.astype(np.int64) - self.span) <= distance))
        self.layer_norm = layers.LayerNorm(epsilon=settings.layer_norm_eps, name="layer_norm", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            "embeddings", shape=[2 * self.span, input_shape[-1]], initializer=layers.initializer()
        )
        super().build(input_shape)

    def call(self, hidden):
        length = tf.shape(hidden)[1]
        window = tf.minimum(length, self.span) if self.windowed else self.span
        first = self.span - window
        # tf.slice and tf.expand_dims, not [a:b] and [:, None]: TensorFlow Lite converts them
        # without Flex ops (the int8 copy's second part recomputes this).
        width = self.embeddings.shape[-1]  # static: the LayerNorm is built from it
        rows = self.layer_norm(tf.slice(self.embeddings, [first, 0], [2 * window, width]))
        positions = tf.range(length)
        distance = tf.expand_dims(positions, 1) - tf.expand_dims(positions, 0)
        index = tf.gather(tf.constant(self.rows), distance + self.max_length - 1)
        return rows, index - first

    def get_config(self):
        return {**super().get_config(), "config": self.config}


class DisentangledAttention(layers.Attention):
    """DeBERTa's attention: the parent's query/key/value/output sublayers (and names), with
    `attention_bias` = RelativePositions' (rows, index) in place of an additive bias.

    logits[b, n, i, j] = (q_i.k_j + q_i.Wk r(i,j) + k_j.Wq r(i,j)) / sqrt(3 * head_size),
    r(i, j) = rows[index[i, j]], Wq and Wk the query and key projections (with their biases:
    share_att_key). Each relative term is one matmul against every row, then a gather of each
    pair's row (batch_dims=1 over the query or key axis), as Hugging Face computes it."""

    def call(self, inputs, attention_mask=None, attention_bias=None, training=None):
        rows, index = attention_bias
        if not self._built_from_signature:
            self._build_from_signature(query=inputs, value=inputs)
        query, key, value = self._query_dense(inputs), self._key_dense(inputs), self._value_dense(inputs)
        rows = tf.expand_dims(rows, 0)  # the projections take [B, T, H]
        position_key = tf.squeeze(self._key_dense(rows), 0)  # [W, N, D]
        position_query = tf.squeeze(self._query_dense(rows), 0)
        content = tf.einsum("bind,bjnd->bnij", query, key)
        to_position = tf.gather(
            tf.einsum("bind,wnd->ibnw", query, position_key), index, axis=3, batch_dims=1
        )  # [i, b, n, j]
        from_position = tf.gather(
            tf.einsum("bjnd,wnd->jbnw", key, position_query), tf.transpose(index), axis=3, batch_dims=1
        )  # [j, b, n, i]
        scores = content + tf.transpose(to_position, [1, 2, 0, 3]) + tf.transpose(from_position, [1, 2, 3, 0])
        scores = scores * tf.cast(1.0 / math.sqrt(3.0 * self._key_dim), scores.dtype)
        scores = self._dropout_layer(self._masked_softmax(scores, attention_mask), training=training)
        return self._output_dense(tf.einsum(self._combine_equation, scores, value))


class DisentangledBlock(layers.TransformerEncoderBlock):
    """BERT's post-LN block (DebertaV2Layer is BertLayer's layout) around DeBERTa's attention."""

    attention_class = DisentangledAttention


def build(config: DebertaConfig, dtype: str | None = None, name: str = "deberta_encoder") -> tf_keras.Model:
    """The network under layers.encoder_model's contract (inputs, outputs, `encoder_config`)."""
    inputs = layers.encoder_inputs()
    x = _embeddings(config, inputs, dtype)
    attention_mask = layers.attention_mask(inputs["input_mask"])
    rows, index = RelativePositions(dataclasses.asdict(config), name=RELATIVE, dtype=dtype)(x)
    encoder_outputs = []
    for i in range(config.num_layers):
        # DisentangledSelfAttention's pos_dropout: every layer drops its own table entries.
        layer_rows = tf_keras.layers.Dropout(config.dropout_rate, dtype=dtype)(rows)
        x = DisentangledBlock.for_layer(config, i, dtype)(
            x, attention_mask=attention_mask, attention_bias=(layer_rows, index)
        )
        encoder_outputs.append(x)
    return layers.encoder_model(config, inputs, encoder_outputs, dtype, name)


def _embeddings(config: DebertaConfig, inputs: dict, dtype: str | None):
    """Word embeddings (-> projection), LayerNorm, padding rows zeroed, dropout.

    DebertaV2Embeddings multiplies by the mask; tf.where selects instead, which is the same in
    float32 and keeps the int8 copy's float16 front finite: there LayerNorm's epsilon of 1e-7
    is a float16 subnormal, read as 0, and a padding token's embedding is all zeros ([PAD] is
    nn.Embedding's padding_idx), so its normalised row is 0/0 = NaN, and NaN * 0 is NaN, which
    as a masked key still makes every softmax row NaN."""
    x = tf_keras.layers.Embedding(
        config.vocab_size,
        config.embedding_size or config.hidden_size,
        embeddings_initializer=layers.initializer(),
        name="word_embeddings",
        dtype=dtype,
    )(inputs["input_word_ids"])
    if config.embedding_size is not None:
        x = tf_keras.layers.EinsumDense(
            "abc,cd->abd",
            output_shape=(None, config.hidden_size),
            kernel_initializer=layers.initializer(),
            name="embedding_projection",
            dtype=dtype,
        )(x)
    x = layers.LayerNorm(epsilon=config.layer_norm_eps, name="embeddings/layer_norm", dtype=dtype)(x)
    x = _ZeroPadding(dtype=dtype)(x, inputs["input_mask"])
    return tf_keras.layers.Dropout(config.dropout_rate, dtype=dtype)(x)


class _ZeroPadding(tf_keras.layers.Layer):
    """[B, T, H] rows where the mask [B, T] is 0 set to 0 (see _embeddings)."""

    def call(self, x, mask):
        return tf.where(tf.expand_dims(tf.cast(mask, tf.bool), -1), x, tf.zeros_like(x))


def layers_from(encoder: tf_keras.Model, hidden, input_mask, first: int) -> dict:
    """Family.layers_from's contract: layers `first`.. and the pooler on the hidden states
    entering layer `first` (the relative-position rows recomputed from them)."""
    config = encoder.encoder_config
    attention_mask = layers.attention_mask(input_mask)
    relative = encoder.get_layer(RELATIVE)(hidden)
    for i in range(first, config.num_layers):
        hidden = encoder.get_layer(f"transformer/layer_{i}")(
            hidden, attention_mask=attention_mask, attention_bias=relative
        )
    return layers.pooled_outputs(encoder, hidden)


# config.json settings of DeBERTa-v2/v3 the native network does not compute, and the value
# every v3 checkpoint has (v2-xlarge's conv_kernel_size 3: its ConvLayer is not built).
_REQUIRED = (
    ("relative_attention", True),
    ("share_att_key", True),
    ("position_biased_input", False),
    ("type_vocab_size", 0),
    ("conv_kernel_size", 0),
    ("norm_rel_ebd", "layer_norm"),
)
_DEFAULTS = {
    "relative_attention": False,
    "share_att_key": False,
    "position_biased_input": True,
    "type_vocab_size": 0,
    "conv_kernel_size": 0,
    "norm_rel_ebd": "none",
}


def read_config(raw: dict, path: str) -> DebertaConfig:
    """A DeBERTa-v3 config.json as DebertaConfig; a UserError naming a setting it cannot compute.
    (Missing settings take DebertaV2Config's defaults, as transformers reads them.)"""
    for key, needed in _REQUIRED:
        value = raw.get(key, _DEFAULTS[key])
        if value != needed:
            raise UserError(
                f"--encoder: {path} sets {key} {json.dumps(value)}; the native "
                f"deberta-v2 encoder computes DeBERTa-v3's {key} {json.dumps(needed)}"
            )
    types = raw.get("pos_att_type") or []
    types = types.split("|") if isinstance(types, str) else types
    if sorted(t.strip() for t in types) != ["c2p", "p2c"]:
        raise UserError(
            f"--encoder: {path} sets pos_att_type {json.dumps(raw.get('pos_att_type'))}; "
            'the native deberta-v2 encoder computes ["p2c", "c2p"]'
        )
    activation = raw.get("hidden_act", "gelu")
    if activation not in bert.HF_GELU_APPROXIMATE:
        raise UserError(
            f"--encoder: {path} sets hidden_act {activation}; the native deberta-v2 "
            f"encoder computes {', '.join(bert.HF_GELU_APPROXIMATE)}"
        )
    try:
        hidden = raw["hidden_size"]
        positions = raw.get("max_position_embeddings", 512)
        embedding_size = raw.get("embedding_size", hidden)
        config = DebertaConfig(
            vocab_size=raw["vocab_size"],
            hidden_size=hidden,
            num_layers=raw["num_hidden_layers"],
            num_heads=raw["num_attention_heads"],
            intermediate_size=raw["intermediate_size"],
            max_position_embeddings=positions,
            position_buckets=raw.get("position_buckets", -1),
            max_relative_positions=(
                raw.get("max_relative_positions", -1) if raw.get("max_relative_positions", -1) >= 1 else positions
            ),
            layer_norm_eps=raw.get("layer_norm_eps", 1e-7),
            gelu_approximate=bert.HF_GELU_APPROXIMATE[activation],
            dropout_rate=raw.get("hidden_dropout_prob", 0.1),
            attention_dropout_rate=raw.get("attention_probs_dropout_prob", 0.1),
            embedding_size=embedding_size if embedding_size != hidden else None,
        )
    except KeyError as missing:
        raise UserError(f"--encoder: {path} has no {missing} entry") from None
    if config.hidden_size % config.num_heads or raw.get("attention_head_size", config.head_size) != config.head_size:
        raise UserError(
            f"--encoder: {path}: the heads do not split hidden_size {config.hidden_size} "
            f"evenly into num_attention_heads {config.num_heads}"
        )
    return config


def map_weights(config: DebertaConfig, get) -> dict:
    """Hugging Face's DebertaV2Model tensors under the native names."""
    weights = {
        "word_embeddings/embeddings": get("embeddings.word_embeddings.weight"),
        **bert.hf_layer_norm(get, "embeddings/layer_norm", "embeddings.LayerNorm"),
        f"{RELATIVE}/embeddings": get("encoder.rel_embeddings.weight"),
        **bert.hf_layer_norm(get, f"{RELATIVE}/layer_norm", "encoder.LayerNorm"),
    }
    if config.embedding_size is not None:
        weights["embedding_projection/kernel"] = get("embeddings.embed_proj.weight").T
    for i in range(config.num_layers):
        for native, module in _BLOCK_PARTS:
            read = bert.hf_layer_norm if "layer_norm" in native else bert.hf_dense
            weights.update(read(get, f"transformer/layer_{i}/{native}", f"encoder.layer.{i}.{module}"))
    return weights


# (native sublayer, Hugging Face module) of one DebertaV2Layer.
_BLOCK_PARTS = [
    ("self_attention/query", "attention.self.query_proj"),
    ("self_attention/key", "attention.self.key_proj"),
    ("self_attention/value", "attention.self.value_proj"),
    ("self_attention/attention_output", "attention.output.dense"),
    ("self_attention_layer_norm", "attention.output.LayerNorm"),
    ("intermediate", "intermediate.dense"),
    ("output", "output.dense"),
    ("output_layer_norm", "output.LayerNorm"),
]


def _preprocessor(model_file: str, lower_case: bool, seq_length: int):
    """The SentencePiece preprocessor of spm.model. `lower_case` is the BERT reader's default
    and is not DeBERTa's (DebertaV2Tokenizer keeps case unless tokenizer_config.json says
    otherwise): that file decides, and the settings the tokenizer does not compute are refused."""
    settings_path = os.path.join(os.path.dirname(model_file), "tokenizer_config.json")
    if tf.io.gfile.exists(settings_path):
        with tf.io.gfile.GFile(settings_path) as f:
            try:
                settings = json.loads(f.read())
            except json.JSONDecodeError as e:
                raise UserError(f"--encoder: {settings_path} is not valid JSON ({e.msg}, line {e.lineno})") from None
        for key in ("do_lower_case", "split_by_punct"):
            if settings.get(key):
                raise UserError(
                    f"--encoder: {settings_path} sets {key} true; the native "
                    "DeBERTa-v3 tokenizer computes the published v3 setting, false"
                )
    return SubwordPreprocessor(SentencePieceTokenizer(model_file, SENTENCEPIECE), SPECIAL, seq_length)


FAMILY = Family(
    name="DeBERTa-v3",
    model_types=(MODEL_TYPE,),
    tokenizer_files=("spm.model",),
    read_config=read_config,
    map_weights=map_weights,
    preprocessor=_preprocessor,
    weight_prefixes=("deberta",),
    config_class=DebertaConfig,
    build=build,
    layers_from=layers_from,
    gradient_checkpointing=True,
)
