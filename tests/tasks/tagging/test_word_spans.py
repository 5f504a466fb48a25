"""A raw string's words and their character offsets, in the graph
(trainer/tasks/tagging/word_spans.py): what token classification tags and what its entities'
`start` and `end` index."""

import tensorflow as tf

from trainer.tasks.tagging import word_spans


def split(*strings):
    found, starts, ends = word_spans.split_words(tf.constant(list(strings)))
    return [
        [(word.decode(), start, end) for word, start, end in zip(*row)]
        for row in zip(found.to_list(), starts.to_list(), ends.to_list())
    ]


def test_offsets_index_the_raw_string_through_accents_emoji_and_runs_of_spaces():
    text = "Café  Zoë's 🎉 in São Paulo!"
    [row] = split(text)
    assert [word for word, _, _ in row] == ["Café", "Zoë", "'", "s", "🎉", "in", "São", "Paulo", "!"]
    assert all(text[start:end] == word for word, start, end in row)
    assert row[6] == ("São", 17, 20)


def test_each_punctuation_character_is_a_word_as_conll_tokenizes():
    [row] = split("R.H. Saunders (St. Lawrence)")
    assert [word for word, _, _ in row] == ["R", ".", "H", ".", "Saunders", "(", "St", ".", "Lawrence", ")"]


def test_unicode_spaces_separate_words_and_an_empty_string_has_none():
    assert split("x\u00a0y\u2003z", "", "   ") == [[("x", 0, 1), ("y", 2, 3), ("z", 4, 5)], [], []]


def test_a_nul_character_separates_two_words_and_ends_nothing():
    """TF-Text's regex split reads a string only up to its first NUL: the words after one were
    lost (issue #64)."""
    text = "Ann\x00met Bob \x00 in Rome"
    [row] = split(text)
    assert [word for word, _, _ in row] == ["Ann", "met", "Bob", "in", "Rome"]
    assert all(text[start:end] == word for word, start, end in row)


def test_control_characters_separate_words_as_spaces_do_and_format_characters_do_not():
    text = "a\x01b\x0bc\x1fd\x7fe\x85f g\u200dh \u200d"
    [row] = split(text)
    assert [word for word, _, _ in row] == ["a", "b", "c", "d", "e", "f", "g\u200dh", "\u200d"]
    assert all(text[start:end] == word for word, start, end in row)
