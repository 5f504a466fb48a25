"""Embeddings' numbers, numpy: cosines of pairs and a split's figures of scored pairs (the
Spearman and Pearson correlations of cosine with the score, as sentence-transformers'
EmbeddingSimilarityEvaluator reports them, and CoSENT's loss over the whole split)."""

import numpy as np

from trainer.tasks.regression.scores import correlation_metrics

# The losses' scale: cosines (or their differences, CoSENT's) are multiplied by it before the
# exponential, as sentence-transformers' CoSENTLoss and MultipleNegativesRankingLoss (scale=20.0)
# and CoSENT's author (Su 2022) do. Here, in numpy's module, so that scoring a model's vectors
# (trainer.evaluate, the ONNX runtime's environment) never imports TensorFlow.
SCALE = 20.0

_CHUNK = 512  # rows of the split's pair matrix computed at a time
# A copy's vector agrees with float32's within this cosine (the issue's bar for int8 and bfloat16).
COPY_COSINE = 0.99


def normalized(vectors) -> np.ndarray:
    vectors = np.asarray(vectors, np.float64)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def pair_cosines(vectors) -> np.ndarray:
    """[N, sides, H] -> [N]: the cosine of each row's first two sides."""
    vectors = normalized(vectors)
    return np.sum(vectors[:, 0] * vectors[:, 1], axis=-1)


def share_alike(vectors, others, cosine: float = COPY_COSINE) -> float:
    """The share of vectors (every side of every row) within `cosine` of the other model's."""
    a, b = normalized(vectors), normalized(others)
    return float(np.mean(np.sum(a * b, axis=-1) >= cosine))


def cosent_loss(cosines, scores, scale: float = SCALE) -> float:
    """CoSENT's loss (keras.CoSENTLoss) with every pair of the split's rows in one batch,
    computed a block of rows at a time (a split of n rows has n^2 pairs)."""
    cosines, scores = np.asarray(cosines, np.float64) * scale, np.asarray(scores, np.float64)
    top, total = 0.0, 1.0  # log-sum-exp of [0, kept differences...], kept as top + log(total)
    for start in range(0, len(cosines), _CHUNK):
        block = slice(start, start + _CHUNK)
        differences = cosines[np.newaxis, :] - cosines[block, np.newaxis]
        kept = differences[scores[block, np.newaxis] > scores[np.newaxis, :]]
        if kept.size:
            high = max(top, float(kept.max()))
            total = total * np.exp(top - high) + np.exp(kept - high).sum()
            top = high
    return float(top + np.log(total))


def scored_pairs(vectors, scores) -> dict:
    """A split's block of metrics.json: examples, loss, spearman and pearson of cosine."""
    cosines = pair_cosines(vectors)
    correlations = correlation_metrics(cosines, scores)
    return {
        "examples": int(len(cosines)),
        "loss": cosent_loss(cosines, scores),
        "spearman": correlations["spearman"],
        "pearson": correlations["pearson"],
    }
