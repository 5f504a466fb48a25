"""Embeddings' numbers for texts labelled with classes, numpy: how well a split's vectors keep
each class together. kNN accuracy: each text classified by the vote of its K nearest other texts
of the split (leave-one-out), as a kNN classifier over the vectors would; and the supervised
contrastive loss (keras.SupervisedContrastiveLoss) with the whole split as one batch."""

import numpy as np

from trainer.tasks.embedding.metrics import SCALE, normalized

K = 5  # the neighbours that vote
_CHUNK = 256  # texts scored at a time


def single(vectors) -> np.ndarray:
    """[N, H] unit vectors of [N, H] or the bi-encoder's [N, 1, H]."""
    vectors = np.asarray(vectors)
    return normalized(vectors.reshape(len(vectors), -1))


def neighbour_votes(vectors, labels, k: int = K) -> tuple:
    """(the class the K nearest other texts vote for, ties to the class of the nearer text;
    the share of them of the text's own class), per text."""
    vectors, labels = single(vectors), np.asarray(labels, np.int64)
    k, classes = min(k, len(labels) - 1), labels.max() + 1
    voted, agreeing = np.empty(len(labels), np.int64), np.empty(len(labels))
    for start in range(0, len(labels), _CHUNK):
        block = slice(start, start + _CHUNK)
        cosines = vectors[block] @ vectors.T
        cosines[np.arange(cosines.shape[0]), np.arange(start, start + cosines.shape[0])] = -np.inf
        nearest = labels[np.argsort(-cosines, axis=1, kind="stable")[:, :k]]  # [rows, k], nearest first
        votes = nearest[:, :, None] == np.arange(classes)  # [rows, k, classes]
        first = np.where(votes.any(axis=1), votes.argmax(axis=1), k)  # each class's nearest rank
        voted[block] = np.argmax(votes.sum(axis=1) * (k + 1) - first, axis=1)  # most votes, then nearest
        agreeing[block] = (nearest == labels[block, None]).mean(axis=1)
    return voted, agreeing


def nearest_by_class(vectors, labels) -> tuple:
    """(cosine to the nearest other text of its class, to the nearest text of another class),
    per text; NaN where there is none (the report's histograms)."""
    vectors, labels = single(vectors), np.asarray(labels, np.int64)
    same_best, other_best = np.full(len(labels), np.nan), np.full(len(labels), np.nan)
    for start in range(0, len(labels), _CHUNK):
        block = slice(start, start + _CHUNK)
        cosines = vectors[block] @ vectors.T
        own = np.arange(start, start + cosines.shape[0])
        same = labels[block, None] == labels[None, :]
        same[np.arange(cosines.shape[0]), own] = False
        other = labels[block, None] != labels[None, :]
        for best, kept in ((same_best, same), (other_best, other)):
            top = np.where(kept, cosines, -np.inf).max(axis=1, initial=-np.inf)
            best[block] = np.where(np.isfinite(top), top, np.nan)
    return same_best, other_best


def contrastive_loss(vectors, labels) -> float:
    """keras.SupervisedContrastiveLoss over the whole split as one batch."""
    vectors, labels = single(vectors), np.asarray(labels, np.int64)
    total, anchors = 0.0, 0
    for start in range(0, len(labels), _CHUNK):
        block = slice(start, start + _CHUNK)
        logits = SCALE * (vectors[block] @ vectors.T)
        own = np.arange(start, start + logits.shape[0])
        logits[np.arange(logits.shape[0]), own] = -np.inf
        top = logits.max(axis=1, keepdims=True)
        log_softmax = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        same = labels[block, None] == labels[None, :]
        same[np.arange(logits.shape[0]), own] = False
        positives = same.sum(axis=1)
        kept = positives > 0
        total -= float(np.sum(np.where(same, log_softmax, 0.0).sum(axis=1)[kept] / positives[kept]))
        anchors += int(kept.sum())
    return total / max(anchors, 1)


def labelled_texts(vectors, labels) -> dict:
    """A split's block of metrics.json: examples, loss and knn_accuracy."""
    voted, _ = neighbour_votes(vectors, labels)
    return {
        "examples": int(len(labels)),
        "loss": contrastive_loss(vectors, labels),
        "knn_accuracy": float(np.mean(voted == np.asarray(labels))),
    }
