"""The report's nearest neighbours (trainer/tasks/embedding/neighbours.py): each shown text with
the other texts of the split closest to it, every text once."""

import numpy as np

from trainer.inference.split_predictions import SplitPredictions
from trainer.tasks.embedding.neighbours import nearest


def predictions(rows):
    """rows: (text, its vector, pair, its vector)."""
    texts, first, pairs, second = zip(*rows)
    vectors = np.stack([np.array(first, float), np.array(second, float)], axis=1)
    vectors /= np.linalg.norm(vectors, axis=-1, keepdims=True)
    return SplitPredictions(
        np.array(texts, object), np.zeros(len(rows)), None, None, pairs=np.array(pairs, object), vectors=vectors
    )


ROWS = [
    ("a cat", [1, 0], "a kitten", [0.9, 0.1]),
    ("a car", [0, 1], "a cat", [1, 0]),  # "a cat" again: one text
    ("a truck", [0.1, 0.9], "a bus", [0.3, 0.7]),
]


def test_each_text_gets_the_closest_other_texts_first_and_never_itself():
    shown = nearest(predictions(ROWS), texts=2, neighbours=2)
    assert [entry["text"] for entry in shown] == ["a cat", "a car"]
    assert [near["text"] for near in shown[0]["neighbours"]] == ["a kitten", "a bus"]
    assert [near["text"] for near in shown[1]["neighbours"]] == ["a truck", "a bus"]
    assert shown[0]["neighbours"][0]["cosine"] > shown[0]["neighbours"][1]["cosine"]


def test_a_repeated_text_is_one_candidate():
    shown = nearest(predictions(ROWS), texts=5, neighbours=10)
    assert len(shown) == 5 and all(len(entry["neighbours"]) == 4 for entry in shown)  # 5 distinct texts
