"""The export's `explain_tokens` function: integrated gradients computed by the saved model.

Saved beside `tokenize` and `predict_tokens` (trainer.serving.export), it explains exactly the
outputs `predict_tokens` returns: the calibrated probability of a class (multi-label: a
label's sigmoid probability), or a regression score. It also returns each token's piece of
text and whether it starts a word (trainer.explaining.words), so a loaded model explains
itself without its tokenizer's files.
"""

import tensorflow as tf

from trainer.data import input_pipeline
from trainer.explaining import integrated_gradients as ig
from trainer.explaining import words
from trainer.modeling.encoders.layers import INPUT_KEYS


def word_embeddings(classifier) -> object | None:
    """The classifier's word-embedding layer; None for a TF-Hub encoder, whose layers are its
    publisher's graph and cannot be fed."""
    from trainer.modeling import heads

    try:
        return heads.encoder_layer(classifier).get_layer("word_embeddings")
    except (AttributeError, ValueError):
        return None


def explained_output(module, logits, target):
    """[B]: what is explained of each row, as its task says (its explanations part's output): a score
    itself; else the log-odds of class (label) `target` [B], log p - log(1 - p), whose sigmoid
    is the probability the export returns (after its temperature). Log-odds, not the
    probability: a fine-tuned classifier's probability jumps from near 0 to near 1 over a short
    stretch of the path, which 32 steps of the trapezoid rule cannot follow (on a tiny
    planted-word model, 35% of rows within 5% at 32 steps, 83% at 512); its log-odds change
    smoothly (tests/explaining/test_explain.py)."""
    return module.task.explanations.output(module, logits, target)


def saved_function(module, classifier, preprocessor) -> tf.types.experimental.GenericFunction | None:
    """`module.explain_tokens(features, target, alphas, weights)`, or None when the task explains
    nothing (no explanations part: a sentence embedding's) or the encoder's word embeddings or
    vocabulary cannot be reached (a TF-Hub encoder or preprocessor).

    `module` computes the outputs (`_forward`, `_outputs`: the serving module's own), cutting
    each batch to its padding-ladder length (`lengths`) as prediction does."""
    if module.task.explanations is None:
        return None
    layer, vocabulary = word_embeddings(classifier), words.vocabulary(preprocessor)
    if layer is None or vocabulary is None:
        return None
    texts, starts = words.piece_table(*vocabulary)
    texts, starts = tf.constant(texts, tf.string), tf.constant(starts, tf.bool)
    special = preprocessor.special
    kept = [
        preprocessor.special_ids[token] for token in (special.pad, special.start, special.end, *special.pair_separator)
    ]
    padding = preprocessor.special_ids[special.pad]

    def explain(features, target, alphas, weights):
        features = input_pipeline.trim_to_padded_length(features, module.lengths)
        points = tf.shape(alphas)[0]

        def model_output(repeated):
            logits = tf.cast(module._forward(repeated), tf.float32)
            return explained_output(module, logits, tf.repeat(target, points))

        result = ig.path_attributions(model_output, layer, features, alphas, weights, kept, padding)
        ids = features["input_word_ids"]
        return {**result, "pieces": tf.gather(texts, ids), "starts_word": tf.gather(starts, ids)}

    return tf.function(
        explain,
        input_signature=[
            {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_KEYS},
            tf.TensorSpec([None], tf.int32, name="target"),
            tf.TensorSpec([None], tf.float32, name="alphas"),
            tf.TensorSpec([None], tf.float32, name="weights"),
        ],
        autograph=False,
    )
