"""The scale benchmark's training files: shuffled words of the source texts, no two rows alike."""

import collections
import csv
import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import scale  # noqa: E402

TEXTS = [
    "the cat sat on the mat all day long",
    "I really do not like rainy mondays at all",
    "what a great game that was tonight folks",
    'she said "wow" and left the room quietly',
]
LABELS = [0, 1, 2, 2]


def rows_of(texts, labels, count, chunk_rows):
    return [
        (t, int(i))
        for chunk in scale.generate(texts, labels, count, seed=3, chunk_rows=chunk_rows)
        for t, i in zip(*chunk)
    ]


def test_rows_are_distinct_even_across_chunks():
    rows = rows_of(TEXTS, LABELS, 3000, chunk_rows=700)
    assert len(rows) == 3000
    assert len({t for t, _ in rows}) == 3000


def test_each_row_is_a_shuffle_of_a_source_text_and_carries_its_label():
    sources = {tuple(sorted(t.replace('"', '""').split())): label for t, label in zip(TEXTS, LABELS)}
    for text, label in rows_of(TEXTS, LABELS, 500, chunk_rows=200):
        assert sources[tuple(sorted(text.split()))] == label


def test_labels_keep_the_source_distribution():
    counts = collections.Counter(label for _, label in rows_of(TEXTS, LABELS, 2000, chunk_rows=2000))
    assert abs(counts[2] / 2000 - 0.5) < 0.05 and abs(counts[0] / 2000 - 0.25) < 0.05


def test_too_few_distinct_shuffles_is_an_error_not_a_hang():
    with pytest.raises(ValueError, match="3 distinct rows"):
        rows_of(["two words"], [0], 3, chunk_rows=3)


def test_written_csv_reads_back_with_quotes_intact(tmp_path):
    path = scale.write_csv(str(tmp_path / "train.csv"), scale.generate(TEXTS[3:], [1], 50, seed=0, chunk_rows=20))
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 50 and {r["label"] for r in rows} == {"neutral"}
    assert all(sorted(r["text"].split()) == sorted(TEXTS[3].split()) for r in rows)
