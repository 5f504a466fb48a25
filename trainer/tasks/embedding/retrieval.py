"""Embeddings' numbers for pairs without a score, numpy: each split's pairs as a retrieval task,
as sentence-transformers' InformationRetrievalEvaluator reports it. Every distinct first text of
a pair is a query; every distinct second text of the split is a candidate; a query's relevant
candidates are the second texts of its pairs. Ranked by cosine: recall@1, recall@10, MRR@10
and nDCG@10 over the queries, and the in-batch-negatives loss with the whole split as one batch.

Rows are identified by their texts' ids (UnscoredPairs' labels: [N, 2], the first and second
text's id among the split's distinct texts), so a text repeated across rows is one query or one
candidate, never its own negative.
"""

import numpy as np

from trainer.tasks.embedding.metrics import SCALE, normalized

CUTOFF = 10  # @10: the metrics' depth, as the evaluator's defaults
_CHUNK = 256  # queries ranked at a time


def pair_ids(frame, columns) -> np.ndarray:
    """int32 [rows, len(columns)]: each cell's id among the distinct texts of all `columns`."""
    import pandas as pd

    cells = pd.concat([frame[column].astype(str) for column in columns], ignore_index=True)
    codes = pd.factorize(cells)[0].astype(np.int32)
    return codes.reshape(len(columns), len(frame)).T.copy()


def _queries_and_candidates(vectors, ids):
    """(query vectors, candidate vectors, relevant [queries, candidates] bool, each row's query
    and candidate): the distinct first texts, the distinct second texts, which second texts are
    each first text's, and where each row's two texts are among them."""
    ids = np.asarray(ids)
    _, query_row, query = np.unique(ids[:, 0], return_index=True, return_inverse=True)
    _, candidate_row, candidate = np.unique(ids[:, 1], return_index=True, return_inverse=True)
    relevant = np.zeros((len(query_row), len(candidate_row)), bool)
    relevant[query, candidate] = True
    vectors = normalized(vectors)
    return vectors[query_row, 0], vectors[candidate_row, 1], relevant, (query, candidate)


def ranked_pairs(vectors, ids) -> dict:
    """A split's block of metrics.json: examples, loss, recall_at_1, recall_at_10, mrr_at_10
    and ndcg_at_10 (means over the split's distinct queries)."""
    queries, candidates, relevant, _ = _queries_and_candidates(vectors, ids)
    depth = min(CUTOFF, candidates.shape[0])
    discounts = 1.0 / np.log2(np.arange(2, depth + 2))
    sums = dict.fromkeys(("recall_at_1", "recall_at_10", "mrr_at_10", "ndcg_at_10", "loss"), 0.0)
    for start in range(0, len(queries), _CHUNK):
        block = slice(start, start + _CHUNK)
        cosines, hits = queries[block] @ candidates.T, relevant[block]
        order = np.argsort(-cosines, axis=1, kind="stable")[:, :depth]
        found = np.take_along_axis(hits, order, axis=1)
        wanted = hits.sum(axis=1)
        sums["recall_at_1"] += float(np.sum(found[:, 0] / wanted))
        sums["recall_at_10"] += float(np.sum(found.sum(axis=1) / wanted))
        first = np.where(found.any(axis=1), 1.0 / (1 + found.argmax(axis=1)), 0.0)
        sums["mrr_at_10"] += float(first.sum())
        ideal = np.cumsum(discounts)[np.minimum(wanted, depth) - 1]
        sums["ndcg_at_10"] += float(np.sum((found * discounts).sum(axis=1) / ideal))
        sums["loss"] += float(np.sum(_cross_entropy(cosines * SCALE, hits)))
    return {"examples": int(len(ids)), **{key: value / len(queries) for key, value in sums.items()}}


def _cross_entropy(logits, hits) -> np.ndarray:
    """Per query: -log of the softmax mass on its relevant candidates (each query's positives
    pooled: a text's other positives are not its negatives)."""
    top = logits.max(axis=1, keepdims=True)
    every = np.log(np.exp(logits - top).sum(axis=1))
    wanted = np.log(np.where(hits, np.exp(logits - top), 0.0).sum(axis=1))
    return every - wanted


def positive_ranks(vectors, ids) -> np.ndarray:
    """[rows]: the rank (1 = first) of each row's second text among its split's candidates for
    its first text, others of the query's positives set aside (errors.csv's measure)."""
    queries, candidates, relevant, (q, c) = _queries_and_candidates(vectors, ids)
    own = np.sum(queries[q] * candidates[c], axis=1)
    ranks = np.empty(len(q), np.int64)
    for start in range(0, len(q), _CHUNK):
        block = slice(start, start + _CHUNK)
        cosines = queries[q[block]] @ candidates.T
        ranks[block] = 1 + np.sum((cosines > own[block, None]) & ~relevant[q[block]], axis=1)
    return ranks


def nearest_negatives(vectors, ids) -> np.ndarray:
    """[rows]: the cosine of each row's first text to its nearest candidate that is none of its
    query's positives (NaN where every candidate is one): the report's other histogram, against
    each pair's own cosine."""
    queries, candidates, relevant, (q, _) = _queries_and_candidates(vectors, ids)
    nearest = np.full(len(queries), np.nan)
    for start in range(0, len(queries), _CHUNK):
        block = slice(start, start + _CHUNK)
        cosines = np.where(relevant[block], -np.inf, queries[block] @ candidates.T)
        top = cosines.max(axis=1, initial=-np.inf)
        nearest[block] = np.where(np.isfinite(top), top, np.nan)
    return nearest[q]
