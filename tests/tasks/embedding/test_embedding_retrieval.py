"""Pairs without a score scored as retrieval (trainer/tasks/embedding/retrieval.py): each distinct
first text a query, each distinct second text a candidate, ranked by cosine."""

import numpy as np
import pandas as pd
import pytest

from trainer.tasks.embedding import retrieval


def angles(*degrees):
    """Unit 2-d vectors at these angles."""
    radians = np.radians(degrees)
    return np.stack([np.cos(radians), np.sin(radians)], axis=1)


def rows(firsts, seconds):
    """[N, 2, 2]: row i's first and second vectors."""
    return np.stack([angles(*firsts), angles(*seconds)], axis=1)


def test_a_texts_id_is_one_across_both_columns():
    frame = pd.DataFrame({"a": ["x", "y", "x"], "b": ["y", "z", "w"]})
    np.testing.assert_array_equal(retrieval.pair_ids(frame, ["a", "b"]), [[0, 1], [1, 2], [0, 3]])


def test_vectors_that_find_every_pair_first_score_one():
    result = retrieval.ranked_pairs(rows([0, 90, 180], [1, 91, 181]), [[0, 3], [1, 4], [2, 5]])
    assert {key: result[key] for key in ("recall_at_1", "recall_at_10", "mrr_at_10", "ndcg_at_10")} == {
        "recall_at_1": 1.0,
        "recall_at_10": 1.0,
        "mrr_at_10": 1.0,
        "ndcg_at_10": 1.0,
    }
    assert result["examples"] == 3


def test_a_pair_ranked_third_counts_a_third_in_mrr_and_half_a_gain_in_ndcg():
    # The first query (0 degrees) finds the others' second texts (10, 20) before its own (30);
    # the others' second texts are their first texts themselves.
    vectors, ids = rows([0, 10, 20], [30, 10, 20]), [[0, 3], [1, 4], [2, 5]]
    result = retrieval.ranked_pairs(vectors, ids)
    assert result["mrr_at_10"] == pytest.approx((1 / 3 + 2) / 3)
    assert result["ndcg_at_10"] == pytest.approx((0.5 + 2) / 3)
    assert (result["recall_at_1"], result["recall_at_10"]) == (pytest.approx(2 / 3), 1.0)
    np.testing.assert_array_equal(retrieval.positive_ranks(vectors, ids), [3, 1, 1])


def test_a_query_asked_twice_pools_its_positives():
    # Query 0 has two positives, at 10 and 20 degrees, nearest of all: recall@1 is one of two.
    vectors = rows([0, 0, 180], [10, 20, 170])
    result = retrieval.ranked_pairs(vectors, [[0, 1], [0, 2], [3, 4]])
    assert result["mrr_at_10"] == 1.0 and result["recall_at_10"] == 1.0
    assert result["recall_at_1"] == pytest.approx((0.5 + 1.0) / 2)


def test_a_rank_sets_the_querys_other_positives_aside():
    vectors = rows([0, 0, 180], [20, 10, 170])
    np.testing.assert_array_equal(retrieval.positive_ranks(vectors, [[0, 1], [0, 2], [3, 4]]), [1, 1, 1])


def test_scoring_vectors_imports_no_tensorflow():
    """trainer.evaluate scores an ONNX copy where TensorFlow is not installed (issue 66)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from trainer.tasks.embedding import classes, metrics, neighbours, retrieval\n"
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def test_a_rows_nearest_negative_is_the_closest_text_that_is_none_of_its_pairs():
    # Query 0 (0 degrees) has two pairs (rows 0 and 1: 10 and 60 degrees); its nearest other
    # text is row 2's second text at 40 degrees. Query 1 (90 degrees) has one candidate left: 60.
    vectors = rows([0, 0, 90], [10, 60, 40])
    nearest = retrieval.nearest_negatives(vectors, [[0, 3], [0, 4], [1, 5]])
    np.testing.assert_allclose(nearest, np.cos(np.radians([40, 40, 30])), atol=1e-6)


def test_a_query_whose_every_candidate_is_its_pair_has_no_nearest_negative():
    assert np.isnan(retrieval.nearest_negatives(rows([0], [10]), [[0, 1]])).all()
