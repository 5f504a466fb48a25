"""The classifier: encoder network -> sentence vector -> dropout -> dense head.

It takes token ids, not strings: tokenization runs in tf.data on the host (TPUs cannot run
TF-Text ops, tensorflow/hub#604), and `trainer.serving.export` puts the preprocessor back in front for
serving. Logits are float32 under every dtype policy, so softmax and the loss stay accurate.
"""

import tensorflow as tf
import tf_keras

from trainer.modeling import windows as window_layers
from trainer.modeling.encoders.layers import INPUT_KEYS


class MaskedMeanPooling(tf_keras.layers.Layer):
    """Mean of token vectors over real tokens, computed in float32."""

    def __init__(self, **kwargs):
        super().__init__(dtype="float32", **kwargs)

    def call(self, sequence_output, input_mask):
        mask = tf.expand_dims(tf.cast(input_mask, tf.float32), -1)
        total = tf.reduce_sum(tf.cast(sequence_output, tf.float32) * mask, axis=1)
        return total / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


class Classifier(tf_keras.Model):
    """A functional model whose predict() also returns labels and weights fed alongside.

    Evaluation is then correct whatever order batches come back in (length buckets, replicas,
    workers) and padding rows added for static TPU shapes (weight 0) are simply masked out.
    """

    def train_step(self, data):
        """One optimizer step. `data` is one batch, or (--gradient-accumulation-steps) a tuple of
        micro-batches (pipeline.grouped) whose gradients are summed before the single update.

        Each micro-batch's gradient is of its mean loss (over the whole global micro-batch, see
        compute_loss); weighted by its rows and divided by the rows of all of them it is the
        gradient of the mean loss over every row: exactly one step on the concatenated batch,
        clipping and weight decay included. Under float16 each micro-batch's loss is scaled and
        its gradient unscaled before it is added; an overflow anywhere makes the sum non-finite,
        and the loss-scale optimizer skips the step as it would the big batch's.
        """
        if isinstance(data[0], dict):
            return super().train_step(data)
        variables = self.trainable_variables
        total, rows = [None] * len(variables), 0.0
        for features, labels, weights in data:
            gradients = self._micro_gradients(features, labels, weights, variables)
            real = _global_sum(tf.reduce_sum(tf.cast(weights > 0, tf.float32)))
            total = [_add(t, _scaled(g, real)) for t, g in zip(total, gradients)]
            rows += real
        self.optimizer.apply_gradients(
            [(_scaled(g, 1.0 / tf.maximum(rows, 1.0)), v) for g, v in zip(total, variables) if g is not None]
        )
        return self.get_metrics_result()

    def _micro_gradients(self, features, labels, weights, variables):
        scaling = isinstance(self.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
        with tf.GradientTape() as tape:
            predictions = self(features, training=True)
            loss = self.compute_loss(features, labels, predictions, weights)
            target = self.optimizer.get_scaled_loss(loss) if scaling else loss
        gradients = tape.gradient(target, variables)
        self.compute_metrics(features, labels, predictions, weights)
        return self.optimizer.get_unscaled_gradients(gradients) if scaling else gradients

    def predict_step(self, data):
        """Logits with each row's label and weight, and its row number when the data has one
        (pipeline.evaluation_dataset): the model itself never sees "row"."""
        features, labels, weights = data
        features = dict(features)
        row = features.pop("row", None)
        out = {"logits": self(features, training=False), "label": labels, "weight": weights}
        return out if row is None else {**out, "row": row}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        """The loss to differentiate: the mean over the whole global batch, on every replica.

        Keras averages each replica's batch and then the replicas, which over-weights the
        examples of a final partial batch that splits unevenly (3 rows over 2 replicas: 1/2 for
        one, 1/4 for the others); rescaling by this replica's share of the batch makes the
        summed gradients those of one device. The logged loss is tracked separately by Keras.
        """
        loss = super().compute_loss(x, y, y_pred, sample_weight)
        context = tf.distribute.get_replica_context()
        if loss is None or context is None or context.num_replicas_in_sync == 1:
            return loss
        rows = tf.cast(tf.shape(y)[0], loss.dtype)
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, rows)
        return loss * rows * context.num_replicas_in_sync / tf.maximum(total, 1.0)


def _global_sum(value):
    """`value` summed over the replicas (itself on one)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def _scaled(gradient, factor):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):  # an embedding table's rows
        return tf.IndexedSlices(gradient.values * factor, gradient.indices, gradient.dense_shape)
    return gradient * factor


def _add(total, gradient):
    """Sparse gradients are concatenated, as one gather over the concatenated batch makes them."""
    if total is None or gradient is None:
        return gradient if total is None else total
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(
            tf.concat([total.values, gradient.values], 0),
            tf.concat([total.indices, gradient.indices], 0),
            gradient.dense_shape,
        )
    return total + gradient


def freeze_word_embeddings(network) -> bool:
    """Stops training the word-embedding table of a native encoder; False if there is none.

    Its gradient is sparse, but AdamW's moment decay and weight decay touch every row at every
    step: on a 6-layer/384 BERT that is 11.7M of 22.7M weights updated for nothing.
    """
    try:
        network.get_layer("word_embeddings").trainable = False
        return True
    except (AttributeError, ValueError):  # a hub.KerasLayer has no sublayers to reach
        return False


def build_classifier(
    network, num_classes: int, pooling: str, dropout: float, output_layer=None, windows=None
) -> Classifier:
    """`num_classes` float32 outputs (logits, or one regression value); `output_layer`, when
    given, maps them to what the model returns (a task's rescaling). `windows`: (seq_length,
    window pooling) of --long-texts windows: each window is encoded and pooled on its own, then
    a text's window vectors into one (trainer.modeling.windows)."""
    head = _pooling(pooling, windows) + [
        tf_keras.layers.Dropout(dropout, name="head_dropout"),
        tf_keras.layers.Dense(
            num_classes,
            dtype="float32",
            name="logits",
            kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
        ),
    ]
    head += [output_layer] if output_layer is not None else []
    return Classifier(**_pooled(network, head, windows), name="classifier")


def build_sentence_encoder(network, pooling: str, windows=None) -> tf_keras.Model:
    """The sentence vector itself, float32 [B, H]: the classifier's pooling (and window pooling)
    without its dropout and dense layer; what a bi-encoder (tasks/embedding) trains and exports."""
    head = _pooling(pooling, windows)
    if not head:  # [CLS]: the encoder's pooled output, made float32 as the pooling layers make theirs
        head = [tf_keras.layers.Activation("linear", dtype="float32", name="cls_pooling")]
    return tf_keras.Model(**_pooled(network, head, windows), name="sentence_encoder")


def _pooling(pooling: str, windows) -> list:
    """The head's first layers: mean pooling unless [CLS]'s, then window pooling with windows."""
    if pooling not in ("mean", "cls"):
        raise ValueError(f"unknown pooling {pooling!r}")
    head = [MaskedMeanPooling(name="mean_pooling")] if pooling == "mean" else []
    if windows is not None:
        head += [window_layers.WindowPooling(windows[1], windows[0], name="window_pooling")]
    return head


def _pooled(network, head: list, windows) -> dict:
    """{inputs, outputs} of a model of `head` on `network`, its rows split into windows first
    when `windows` is given."""
    inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name) for name in INPUT_KEYS}
    encoded = inputs if windows is None else window_layers.SplitWindows(windows[0], name="split_windows")(inputs)
    return {
        "inputs": inputs,
        "outputs": apply_head(head, network(encoded), encoded["input_mask"], inputs["input_mask"]),
    }


class TokenPadding(tf_keras.layers.Layer):
    """Per-token outputs [B, T, K] padded with zeros to [B, seq_length, K]: a split's outputs
    then stack whatever length each batch was padded to (modeling.evaluation)."""

    def __init__(self, seq_length: int, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.seq_length = seq_length

    def call(self, outputs):
        return tf.pad(outputs, [[0, 0], [0, self.seq_length - tf.shape(outputs)[1]], [0, 0]])

    def get_config(self):
        return {**super().get_config(), "seq_length": self.seq_length}


def build_tagger(network, num_tags: int, dropout: float, seq_length: int) -> Classifier:
    """Token classification: float32 logits of `num_tags` tags per token [B, seq_length, tags]
    (Devlin et al. 2019, section 5.3: a tag per token from its final hidden vector); the task
    reads each word's at its first piece."""
    inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name) for name in INPUT_KEYS}
    head = [
        tf_keras.layers.Dropout(dropout, name="head_dropout"),
        tf_keras.layers.Dense(
            num_tags,
            dtype="float32",
            name="logits",
            kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
        ),
        TokenPadding(seq_length, name="token_padding"),
    ]
    return Classifier(inputs=inputs, outputs=apply_head(head, network(inputs), inputs["input_mask"]), name="tagger")


def apply_head(head, encoder_outputs: dict, input_mask, text_mask=None):
    """The head layers (pooling if mean, window pooling, dropout, logits, the task's output
    layer) on the encoder's outputs: the sentence vector is the masked mean of the sequence
    output, or the pooled [CLS] output when there is no pooling layer; a tagger's head (ending
    in TokenPadding) reads the sequence output. `text_mask`: the mask of
    the rows before they were split into windows, which WindowPooling takes."""
    if isinstance(head[0], MaskedMeanPooling):
        x, head = head[0](encoder_outputs["sequence_output"], input_mask), head[1:]
    elif isinstance(head[-1], TokenPadding):  # a tagger's: every token's vector
        x = encoder_outputs["sequence_output"]
    else:
        x = encoder_outputs["pooled_output"]
    for layer in head:
        x = layer(x, text_mask) if isinstance(layer, window_layers.WindowPooling) else layer(x)
    return x


def windowed(classifier: tf_keras.Model) -> bool:
    """Whether a built classifier splits its rows into windows (--long-texts windows)."""
    return any(isinstance(layer, window_layers.SplitWindows) for layer in classifier.layers)


def encoder_layer(classifier: tf_keras.Model) -> tf_keras.layers.Layer:
    """A built classifier's encoder network: its first layer after the inputs."""
    return _body(classifier)[0]


def head_layers(classifier: tf_keras.Model) -> list:
    """A built classifier's head layers, in order (what apply_head takes): every layer after
    its inputs and the encoder."""
    return _body(classifier)[1:]


def _body(classifier: tf_keras.Model) -> list:
    return [
        layer
        for layer in classifier.layers
        if not isinstance(layer, (tf_keras.layers.InputLayer, window_layers.SplitWindows))
    ]
