"""Integrated gradients (Sundararajan, Taly and Yan 2017, arXiv:1703.01365) on word embeddings.

For a text's word embeddings x, a baseline b and the model's output F (the log-odds of the
explained class, trainer.explaining.exported.explained_output, or a regression score), token
i's attribution is

    IG_i = (x_i - b_i) . integral over a in [0, 1] of dF(b + a (x - b)) / dx_i

summed over the embedding's width. The attributions add up to F(x) - F(b) ("completeness"),
which says how well a finite number of steps approximates the integral: `completeness_error`.

The baseline is each text with its word pieces replaced by the padding token, special tokens
([CLS], [SEP], <s>, </s>) and positions kept, as Captum's BERT tutorials build it: only the
words themselves are explained, and the attention mask is the text's own.

The integral is the trapezoid rule on `steps` equal intervals, its `steps + 1` points computed
as one batch (`trapezoid`); its two ends are F(b) and F(x), which completeness needs anyway.
The graph half (`path_attributions`) is saved in the exported model (trainer.serving.export),
so trainer.explain, trainer.serve and the report compute with the very model that predicts.
"""

import contextlib

import numpy as np
import tensorflow as tf

BASELINE = "padding"  # which embedding the path starts from: the padding token's


def trapezoid(steps: int):
    """(points a [steps + 1], weights [steps + 1]) of the trapezoid rule on [0, 1]."""
    alphas = np.linspace(0.0, 1.0, steps + 1, dtype=np.float64)
    weights = np.full(steps + 1, 1.0 / steps)
    weights[[0, -1]] /= 2
    return alphas.astype(np.float32), weights.astype(np.float32)


def completeness_error(attributions_sum, output, baseline_output):
    """|sum of attributions - (F(x) - F(b))| / |F(x) - F(b)| per row: 0 for an exact integral.
    A row whose text moves F by less than 1e-6 has nothing to attribute: its error is 0 when
    the attributions add up to as little."""
    attributions_sum, output, baseline_output = (
        np.asarray(v, np.float64) for v in (attributions_sum, output, baseline_output)
    )
    change = output - baseline_output
    gap = np.abs(attributions_sum - change)
    return np.where(np.abs(change) > 1e-6, gap / np.maximum(np.abs(change), 1e-12), gap / 1e-6)


@contextlib.contextmanager
def fed_embeddings(layer):
    """While the model is traced: `layer` (the word-embedding lookup) returns the tensor set in
    the yielded dict under "value" instead of looking its ids up. This is how Captum's
    LayerIntegratedGradients reaches a layer's output (a forward hook replacing it); tf-keras
    calls `layer.call` through the instance, so an attribute set on it takes the place of the
    class's method until removed. The value is shaped as the looked-up ids are: the model
    may reshape its rows on the way (--long-texts windows splits each row into its windows)."""
    feed = {}
    layer.call = lambda inputs, *args, **kwargs: tf.cast(
        tf.reshape(feed["value"], tf.concat([tf.shape(inputs), [-1]], 0)), layer.compute_dtype
    )
    try:
        yield feed
    finally:
        del layer.call


def baseline_ids(ids, content, padding_id: int):
    """The baseline's token ids: each content token (a word piece) replaced by padding."""
    return tf.where(content, tf.constant(padding_id, ids.dtype), ids)


def content_tokens(features, kept_ids):
    """[B, T] True at the tokens explained: real (masked in) tokens other than `kept_ids`
    (the start, end, separator and padding tokens, which the baseline keeps)."""
    ids = features["input_word_ids"]
    special = tf.reduce_any(ids[..., tf.newaxis] == tf.constant(kept_ids, ids.dtype), axis=-1)
    return (features["input_mask"] > 0) & ~special


def path_attributions(model_output, layer, features, alphas, weights, kept_ids, padding_id: int):
    """Per-token attributions [B, T] and the output at each point of the path [B, K].

    `model_output(features)` -> [B] the explained output of a batch, computed through `layer`
    (the word embeddings); `alphas` and `weights`: the quadrature's points and weights (a
    chunk of `trapezoid`'s: the caller sums chunks). Each row is repeated once per point.
    """
    content = content_tokens(features, kept_ids)
    table = layer.embeddings
    inputs = tf.cast(tf.gather(table, features["input_word_ids"]), tf.float32)
    baseline = tf.cast(tf.gather(table, baseline_ids(features["input_word_ids"], content, padding_id)), tf.float32)
    difference = inputs - baseline
    rows, width = tf.shape(inputs)[0], tf.shape(inputs)[1]
    points = tf.shape(alphas)[0]
    path = baseline[:, tf.newaxis] + alphas[tf.newaxis, :, tf.newaxis, tf.newaxis] * difference[:, tf.newaxis]
    path = tf.reshape(path, [rows * points, width, -1])
    repeated = {name: tf.repeat(value, points, axis=0) for name, value in features.items()}
    with fed_embeddings(layer) as feed, tf.GradientTape() as tape:
        tape.watch(path)
        feed["value"] = path
        outputs = model_output(repeated)
    gradients = tf.reshape(tape.gradient(outputs, path), [rows, points, width, -1])
    averaged = tf.einsum("k,bkth->bth", weights, gradients)
    attributions = tf.reduce_sum(averaged * difference, axis=-1)
    return {"attributions": attributions, "outputs": tf.reshape(outputs, [rows, points]), "content": content}
