"""The blocks every native encoder family is built from, and the contract they share.

A TF-Hub encoder is a SavedModel traced in float32: under a mixed policy `hub.KerasLayer` still
runs every encoder matmul in float32 (tensorflow/hub#466, #790). Building the network from
tf-keras layers under the active policy gives real bf16/fp16 compute with float32 variables.

The contract (every family's `build` keeps it, trainer.modeling.encoders.models): the TF-Hub
encoder interface (`INPUT_KEYS` in; pooled_output, sequence_output, encoder_outputs out), the
network's config as its `encoder_config` attribute, and variables named as Model Garden's
BertEncoder (official/nlp/modeling/networks/bert_encoder.py) names them, under the roots of
`canonical_name` ("transformer/layer_0/self_attention/query/kernel:0", ...): one name mapping
reads TF-Hub SavedModels and this package's own exports of every family.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf
import tf_keras

from trainer.errors import UserError

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass(frozen=True)
class TransformerShape:
    """The sizes every family's config starts with; a family's config class (a frozen dataclass
    subclassing this) adds `max_position_embeddings`, `family` and its own fields."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def max_length(self) -> int:
        """The longest input the family reads: its position table's (or, with rotary
        positions, the context it was trained for)."""
        return self.max_position_embeddings


@dataclasses.dataclass(frozen=True)
class EncoderConfig(TransformerShape):
    """The shape and switches of the BERT network (trainer.modeling.encoders.models.bert), which
    BERT, ELECTRA, RoBERTa, XLM-R and MPNet share; families with other math have their own
    config class."""

    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    # Google's original BERT and Model Garden use the tanh approximation of GELU; Hugging Face's
    # "gelu" is the exact erf form. Each loader sets this from its format.
    gelu_approximate: bool = False
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.1
    # ELECTRA's embeddings may be narrower than its blocks (Small: 128 -> 256); a dense
    # "embedding_projection" maps them up. None: as wide as hidden_size, no projection (BERT).
    embedding_size: int | None = None
    # RoBERTa-style positions (RoBERTa, XLM-R, MPNet): the padding token's id, after which real
    # tokens count (fairseq's make_positions: padding_idx + 1 + index; padding sits at
    # padding_idx). None: BERT's positions 0, 1, ... for every token.
    position_padding_id: int | None = None
    # MPNet's relative-position bias (T5-style buckets shared by every layer); 0: none.
    relative_attention_buckets: int = 0
    # The family (trainer.modeling.encoders.families) whose checkpoint this came from: the
    # model card and exports name it; the network is the same for all that share this class.
    family: str = "bert"

    @property
    def max_length(self) -> int:
        """The longest input the position table covers (RoBERTa's first two rows are unused)."""
        if self.position_padding_id is None:
            return self.max_position_embeddings
        return self.max_position_embeddings - self.position_padding_id - 1


def initializer():
    # One initializer object per weight: a reused unseeded tf_keras initializer repeats its
    # values in every layer (tf-keras says so in its "unseeded initializer" warning).
    return tf_keras.initializers.TruncatedNormal(stddev=0.02)


def gelu(x, approximate: bool):
    """GELU evaluated in float32 and returned in x's dtype (a no-op cast under float32).

    Under mixed_bfloat16, TensorFlow's bfloat16 Erfc/Exp/Mul kernels of GELU and its gradient
    cost more CPU time than the same ops in float32 with a cast each way (docs/performance.md),
    and the float32 result is the more accurate one.
    """
    return tf.cast(tf_keras.activations.gelu(tf.cast(x, tf.float32), approximate=approximate), x.dtype)


class LayerNorm(tf_keras.layers.LayerNormalization):
    """tf-keras' LayerNormalization (last axis, scale and offset, or scale only with
    center=False as ModernBERT's bias-free norms), with its gradient written out.

    The same variables, float32 statistics and output dtype. Autodiff through tf.nn.moments and
    tf.nn.batch_normalization builds about twice the ops of the closed-form gradient; a layer
    norm's forward and gradient take ~30% less CPU time this way (docs/performance.md).
    """

    def call(self, inputs):
        epsilon = self.epsilon

        @tf.custom_gradient
        def normalize(x, gamma, beta):
            centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
            inverse = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
            normalized = centered * inverse

            def gradient(upstream):
                scaled = upstream * gamma
                inputs_gradient = inverse * (
                    scaled
                    - tf.reduce_mean(scaled, axis=-1, keepdims=True)
                    - normalized * tf.reduce_mean(scaled * normalized, axis=-1, keepdims=True)
                )
                rows = list(range(len(upstream.shape) - 1))
                return (
                    inputs_gradient,
                    tf.reduce_sum(upstream * normalized, axis=rows),
                    tf.reduce_sum(upstream, axis=rows),
                )

            return normalized * gamma + beta, gradient

        offset = self.beta if self.center else tf.zeros_like(self.gamma)
        outputs = normalize(tf.cast(inputs, tf.float32), self.gamma, offset)
        return tf.cast(outputs, self.compute_dtype)


class PositionEmbedding(tf_keras.layers.Layer):
    """Learned absolute positions, sliced to the batch's length so any T <= max positions works.

    With `padding_id` (RoBERTa's layout) a real token's position is padding_id + 1 + its index
    and a padding token's is padding_id, as Hugging Face's create_position_ids_from_input_ids
    computes them from the ids (here from the mask, which marks the same tokens)."""

    def __init__(self, max_length: int, padding_id: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.padding_id = padding_id

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            "embeddings", shape=[self.max_length, input_shape[-1]], initializer=initializer()
        )
        super().build(input_shape)

    def call(self, inputs, input_mask=None):
        if self.padding_id is None:
            length = tf.shape(inputs)[1]
            return tf.expand_dims(tf.cast(self.embeddings[:length], self.compute_dtype), 0)
        mask = tf.cast(input_mask, tf.int32)
        positions = tf.cumsum(mask, axis=1) * mask + self.padding_id
        return tf.cast(tf.gather(self.embeddings, positions), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "max_length": self.max_length, "padding_id": self.padding_id}


class Attention(tf_keras.layers.MultiHeadAttention):
    """Multi-head self-attention with an optional additive bias on its logits [1|B, N, T, T].

    tf-keras' MultiHeadAttention takes only a boolean mask; MPNet adds a learned relative-position
    bias before the softmax. Same sublayers and variable names as its parent, so one weight
    mapping serves every family; without a bias it is the parent's computation.
    """

    def call(self, inputs, attention_mask=None, attention_bias=None, training=None):
        if attention_bias is None:
            return super().call(inputs, inputs, attention_mask=attention_mask, training=training)
        if not self._built_from_signature:
            self._build_from_signature(query=inputs, value=inputs)
        query = self._query_dense(inputs) * (1.0 / math.sqrt(float(self._key_dim)))
        key, value = self._key_dense(inputs), self._value_dense(inputs)
        scores = tf.einsum(self._dot_product_equation, key, query)
        scores = self._masked_softmax(scores + tf.cast(attention_bias, scores.dtype), attention_mask)
        scores = self._dropout_layer(scores, training=training)
        return self._output_dense(tf.einsum(self._combine_equation, scores, value))


class TransformerEncoderBlock(tf_keras.layers.Layer):
    """Post-LN BERT block: x = LN(x + Attention(x)); x = LN(x + Dense(gelu(Dense(x))))."""

    # DeBERTa's block is this one with its own attention (same sublayers, its own logits).
    attention_class = Attention
    # Set by recompute_blocks on the training network only: exports rebuild from the config.
    recompute = False

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        intermediate_size: int,
        layer_norm_eps: float,
        gelu_approximate: bool,
        dropout_rate: float,
        attention_dropout_rate: float,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._settings = dict(
            num_heads=num_heads,
            head_size=head_size,
            intermediate_size=intermediate_size,
            layer_norm_eps=layer_norm_eps,
            gelu_approximate=gelu_approximate,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
        )
        hidden_size = num_heads * head_size
        # Sublayers get this block's policy explicitly: tf_keras does not pass a parent's dtype
        # policy down, and an export must be able to build float32 under a mixed global policy.
        policy = self.dtype_policy
        self.self_attention = self.attention_class(
            num_heads,
            key_dim=head_size,
            dropout=attention_dropout_rate,
            kernel_initializer=initializer(),
            name="self_attention",
            dtype=policy,
        )
        self.attention_dropout = tf_keras.layers.Dropout(dropout_rate, dtype=policy)
        self.self_attention_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, name="self_attention_layer_norm", dtype=policy
        )
        self.intermediate = tf_keras.layers.EinsumDense(
            "abc,cd->abd",
            output_shape=(None, intermediate_size),
            bias_axes="d",
            kernel_initializer=initializer(),
            name="intermediate",
            dtype=policy,
        )
        self.output_dense = tf_keras.layers.EinsumDense(
            "abc,cd->abd",
            output_shape=(None, hidden_size),
            bias_axes="d",
            kernel_initializer=initializer(),
            name="output",
            dtype=policy,
        )
        self.output_dropout = tf_keras.layers.Dropout(dropout_rate, dtype=policy)
        self.output_layer_norm = LayerNorm(epsilon=layer_norm_eps, name="output_layer_norm", dtype=policy)

    @classmethod
    def for_layer(cls, config, index: int, dtype: str | None) -> "TransformerEncoderBlock":
        """Block `index` of the network `config` describes, named as the contract names it."""
        return cls(
            num_heads=config.num_heads,
            head_size=config.head_size,
            intermediate_size=config.intermediate_size,
            layer_norm_eps=config.layer_norm_eps,
            gelu_approximate=config.gelu_approximate,
            dropout_rate=config.dropout_rate,
            attention_dropout_rate=config.attention_dropout_rate,
            name=f"transformer/layer_{index}",
            dtype=dtype,
        )

    def call(self, inputs, attention_mask, attention_bias=None, training=None):
        if self.recompute and training is True:
            return self._recomputed(inputs, attention_mask, attention_bias)
        return self._forward(inputs, attention_mask, attention_bias, training)

    def _recomputed(self, inputs, attention_mask, attention_bias):
        """The block under tf.recompute_grad: the backward pass runs it again from its inputs
        instead of keeping its activations (--gradient-checkpointing).

        The recomputation must drop the same units as the forward pass did, or the gradient is
        of another network. tf.recompute_grad does not replay random ops, so each dropout
        generator of the block is reset to the state it had before the forward pass, and ends
        where the forward pass left it: masks, gradients and the generators' checkpointed
        states are those of a run without the flag. Only float tensors are arguments (gradients
        flow to them; custom_gradient takes no keyword arguments in graph mode); the boolean
        mask and DeBERTa's int position index are captured.
        """
        generators = _dropout_generators(self)
        states = [tf.identity(generator.state) for generator in generators]
        parts = tf.nest.flatten(attention_bias)
        differentiable = [i for i, part in enumerate(parts) if part is not None and part.dtype.is_floating]

        def forward(hidden, *bias_parts):
            for generator, state in zip(generators, states):
                generator.reset(state)
            filled = list(parts)
            for index, part in zip(differentiable, bias_parts):
                filled[index] = part
            bias = tf.nest.pack_sequence_as(attention_bias, filled)
            return self._forward(hidden, attention_mask, bias, training=True)

        return tf.recompute_grad(forward)(inputs, *[parts[i] for i in differentiable])

    def _forward(self, inputs, attention_mask, attention_bias, training):
        attended = self.self_attention(
            inputs, attention_mask=attention_mask, attention_bias=attention_bias, training=training
        )
        x = self.self_attention_layer_norm(inputs + self.attention_dropout(attended, training=training))
        inner = gelu(self.intermediate(x), approximate=self._settings["gelu_approximate"])
        feed_forward = self.output_dense(inner)
        return self.output_layer_norm(x + self.output_dropout(feed_forward, training=training))

    def get_config(self):
        return {**super().get_config(), **self._settings}


def recompute_blocks(network: tf_keras.Model) -> int:
    """Makes every TransformerEncoderBlock of `network` recompute its activations in the
    backward pass of training (--gradient-checkpointing); returns how many blocks it found.

    A flag on the built layers, not on the config: exports and the bfloat16 copy rebuild the
    network from its config, so what they trace and save is unchanged.
    """
    blocks = [layer for layer in network.submodules if isinstance(layer, TransformerEncoderBlock)]
    for block in blocks:
        if any(generator is None for generator in _dropout_generators(block, strict=False)):
            raise RuntimeError(
                "--gradient-checkpointing needs dropout drawn from "
                "tf.random.Generator (tf_keras.backend.experimental."
                "enable_tf_random_generator() before the encoder is built)"
            )
        block.recompute = True
    return len(blocks)


def _dropout_generators(layer: tf_keras.layers.Layer, strict: bool = True) -> list:
    """The tf.random.Generator of each random sublayer of `layer`, in a stable order (None for
    one on tf-keras' legacy stateful ops when not `strict`). Built here if not yet, so that the
    state read before a recomputed forward pass is the one its dropout then draws from."""
    generators = []
    for sublayer in layer.submodules:
        random = getattr(sublayer, "_random_generator", None)
        if random is None:
            continue
        random._maybe_init()  # tf-keras builds its generator lazily, at the first draw
        generator = getattr(random, "_generator", None)
        if generator is None and strict:
            raise RuntimeError(f"{sublayer.name}: dropout without a tf.random.Generator")
        generators.append(generator)
    return generators


def attention_mask(input_mask):
    """Every query may attend to every real (unpadded) key: [B, 1, T], broadcast over queries.
    (tf.expand_dims, not [:, tf.newaxis]: TensorFlow Lite converts it without Flex ops.)"""
    return tf.cast(tf.expand_dims(input_mask, 1), tf.bool)


def encoder_inputs() -> dict[str, tf.Tensor]:
    """The network's inputs: int32 [B, T] for each of INPUT_KEYS, any T."""
    return {key: tf_keras.Input(shape=(None,), dtype=tf.int32, name=key) for key in INPUT_KEYS}


def encoder_model(config, inputs: dict, encoder_outputs: list, dtype: str | None, name: str) -> tf_keras.Model:
    """The network with the TF-Hub encoder interface, from its inputs and each block's output:
    the last is the sequence output, the pooler reads its [CLS] row. The config rides along as
    `encoder_config`: exports rebuild the network from it in float32 and save it beside."""
    sequence = encoder_outputs[-1]
    pooled = pooler(config.hidden_size, dtype)(sequence[:, 0, :])
    model = tf_keras.Model(
        inputs, dict(pooled_output=pooled, sequence_output=sequence, encoder_outputs=encoder_outputs), name=name
    )
    model.encoder_config = config
    return model


def pooled_outputs(encoder: tf_keras.Model, hidden) -> dict:
    """The pooled and sequence outputs of a built `encoder` for its last hidden states: the
    tail of every family's `layers_from`."""
    pooled = encoder.get_layer("pooler_transform")(hidden[:, 0, :])
    return dict(pooled_output=pooled, sequence_output=hidden)


# Checkpoints without a pooler keep these freshly initialised (see pooler).
FRESH_WHEN_ABSENT = ("pooler_transform/kernel", "pooler_transform/bias")


def pooler(hidden: int, dtype: str | None) -> tf_keras.layers.Dense:
    """BERT's pooler: tanh(Dense([CLS])), pretrained with next-sentence prediction.

    ELECTRA discriminators (and BertModel(add_pooling_layer=False) checkpoints) have none, so
    their pooler starts freshly initialised and trains with the head ("cls" pooling still
    works). ELECTRA's own classification head is the same shape with GELU in place of tanh
    (ElectraClassificationHead: dense + GELU on [CLS]); keeping tanh keeps one network and one
    set of variable names for every checkpoint, so exports and their reload do not depend on
    the source; either way the head reads a learned, bounded projection of [CLS].
    """
    return tf_keras.layers.Dense(
        hidden, activation="tanh", kernel_initializer=initializer(), name="pooler_transform", dtype=dtype
    )


# Model Garden / TF-Hub variable names start at one of these components; anything before them
# is a scope added by whoever built or saved the model.
NAME_ROOTS = (
    "word_embeddings",
    "position_embedding",
    "type_embeddings",
    "embeddings",
    "embedding_projection",
    "relative_attention_bias",
    "transformer",
    "pooler_transform",
)


def canonical_name(variable_name: str) -> str | None:
    """'outer/transformer/layer_0/.../kernel:0' -> 'transformer/layer_0/.../kernel', else None."""
    parts = variable_name.split(":")[0].split("/")
    for index, part in enumerate(parts):
        if part in NAME_ROOTS:
            return "/".join(parts[index:])
    return None


def assign_weights(network: tf_keras.Model, weights: dict[str, np.ndarray], source: str):
    """Sets every encoder variable from `weights` (canonical name -> array).

    Kernels may come flat as [in, out]: the attention's [hidden, heads, head_size] layout is the
    same memory order, so a reshape places them (the parity tests pin the orientation). A
    pooler the checkpoint lacks keeps its initial values (FRESH_WHEN_ABSENT).
    """
    remaining = dict(weights)
    for variable in network.weights:
        name = canonical_name(variable.name)
        if name in FRESH_WHEN_ABSENT and name not in remaining:
            continue
        if name not in remaining:
            raise UserError(f"{source}: no weights for encoder variable {name or variable.name}")
        value = np.asarray(remaining.pop(name))
        if value.size != variable.shape.num_elements():
            raise UserError(f"{source}: {name} has shape {value.shape}, the encoder needs {variable.shape.as_list()}")
        variable.assign(value.reshape(variable.shape).astype(np.float32))
    if remaining:
        raise UserError(f"{source}: weights the encoder has no place for: {', '.join(sorted(remaining)[:5])}")
