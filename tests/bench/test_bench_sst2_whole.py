"""bench/sst2_whole.py: SST-2's leak-free protocol (issue #65). Held-out rows are whole sentences,
and no row left for training or transfer lies inside one."""

import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import sst2_whole  # noqa: E402

from trainer.data.leakage import words  # noqa: E402


def tree(sentence, label):
    """A sentence and every run of its words, as GLUE's SST-2 training set holds a parse tree's phrases."""
    w = sentence.split()
    return [(" ".join(w[i:j]), label) for i in range(len(w)) for j in range(i + 1, len(w) + 1)]


SENTENCES = [(f"sentence number {i} is a whole review of film {i}", str(i % 2)) for i in range(8)]
ROWS = [row for sentence, label in SENTENCES for row in tree(sentence, label)]


def test_held_out_rows_are_whole_sentences():
    split = sst2_whole.whole_sentence_split(ROWS, held_out=2, seed=0)
    assert len(split.validation) == len(split.test) == 2
    assert set(split.validation + split.test) <= set(SENTENCES)
    assert not set(split.validation) & set(split.test)


def test_no_pool_row_lies_inside_a_held_out_sentence():
    split = sst2_whole.whole_sentence_split(ROWS, held_out=2, seed=0)
    held = [words(s) for s, _ in split.validation + split.test]
    inside = lambda w, h: any(h[i : i + len(w)] == w for i in range(len(h)))  # noqa: E731
    assert not [r for r in split.pool if any(inside(words(r[0]), h) for h in held)]
    assert split.counts["pool_holding_a_held_out_sentence"] == 0


def test_rows_of_other_sentences_stay_in_the_pool():
    split = sst2_whole.whole_sentence_split(ROWS, held_out=2, seed=0)
    kept = [s for s in SENTENCES if s not in split.validation + split.test]
    assert len(kept) == 4 and set(kept) <= set(split.pool)
    # a phrase of a kept sentence only ("film 5" is sentence 5's) stays; one it shares with a
    # held-out sentence ("is a whole review") goes
    assert all((f"film {s.split()[2]}", label) in split.pool for s, label in kept)
    assert not [r for r in split.pool if r[0] == "is a whole review"]


def test_the_split_is_seeded():
    first, again = (sst2_whole.whole_sentence_split(ROWS, held_out=2, seed=3) for _ in range(2))
    assert (first.validation, first.test) == (again.validation, again.test)
