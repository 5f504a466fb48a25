"""The classifier: encoder network -> sentence vector -> dropout -> dense head.

It takes token ids, not strings: tokenization runs in tf.data on the host (TPUs cannot run
TF-Text ops, tensorflow/hub#604), and `trainer.serving.export` puts the preprocessor back in front for
serving. Logits are float32 under every dtype policy, so softmax and the loss stay accurate.
"""
import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.bert import INPUT_KEYS


class MaskedMeanPooling(tf_keras.layers.Layer):
    """Mean of token vectors over real tokens, computed in float32."""

    def __init__(self, **kwargs):
        super().__init__(dtype="float32", **kwargs)

    def call(self, sequence_output, input_mask):
        mask = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]
        total = tf.reduce_sum(tf.cast(sequence_output, tf.float32) * mask, axis=1)
        return total / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


class Classifier(tf_keras.Model):
    """A functional model whose predict() also returns labels and weights fed alongside.

    Evaluation is then correct whatever order batches come back in (length buckets, replicas,
    workers) and padding rows added for static TPU shapes (weight 0) are simply masked out.
    """

    def predict_step(self, data):
        features, labels, weights = data
        return {"logits": self(features, training=False), "label": labels, "weight": weights}

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


def build_classifier(network, num_classes: int, pooling: str, dropout: float,
                     output_layer=None) -> Classifier:
    """`num_classes` float32 outputs (logits, or one regression value); `output_layer`, when
    given, maps them to what the model returns (a task's rescaling)."""
    inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name) for name in INPUT_KEYS}
    outputs = network(inputs)
    if pooling == "mean":
        sentence = MaskedMeanPooling(name="mean_pooling")(outputs["sequence_output"], inputs["input_mask"])
    elif pooling == "cls":
        sentence = outputs["pooled_output"]
    else:
        raise ValueError(f"unknown pooling {pooling!r}")
    sentence = tf_keras.layers.Dropout(dropout, name="head_dropout")(sentence)
    logits = tf_keras.layers.Dense(
        num_classes, dtype="float32", name="logits",
        kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02))(sentence)
    if output_layer is not None:
        logits = output_layer(logits)
    return Classifier(inputs=inputs, outputs=logits, name="classifier")
