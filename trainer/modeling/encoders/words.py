"""A raw string's words with their character offsets, in the graph: the units token
classification tags (issue #52), so that an entity's `start` and `end` index the caller's own
string, accents, emoji and runs of spaces included.

A word is a run of characters between spaces, with each punctuation character a word of its own,
as BERT's BasicTokenizer splits text before WordPiece (and as CoNLL files are tokenized: "Paris"
and "," are two words). Offsets count Unicode code points, as Python's `str` indexes them; a
caller in a UTF-16 language (JavaScript, Java) counts an emoji outside the BMP as two.
"""
import tensorflow as tf
import tensorflow_text as text

# Unicode separators and ASCII whitespace (RE2's \s is ASCII only).
_SPACES = r"[\s\p{Z}]+"
# BERT's _is_punctuation: every Unicode P* character and the ASCII symbols outside letters/digits.
_PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"


def split_words(strings: tf.Tensor):
    """(words [B, (W)] string, starts [B, (W)] int64, ends [B, (W)] int64) of [B] UTF-8
    strings; `starts` and `ends` are code-point offsets, `ends` exclusive."""
    words, byte_starts, byte_ends = text.regex_split_with_offsets(
        strings, f"{_SPACES}|{_PUNCTUATION}", _PUNCTUATION)
    _, char_starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
    return words, _char_offsets(byte_starts, char_starts), _char_offsets(byte_ends, char_starts)


def _char_offsets(byte_offsets: tf.RaggedTensor, char_starts: tf.RaggedTensor) -> tf.RaggedTensor:
    """Byte offsets [B, (W)] as code-point offsets: how many characters start before each."""
    padding = tf.int64.max
    starts = char_starts.to_tensor(default_value=padding)
    found = tf.searchsorted(starts, byte_offsets.to_tensor(default_value=padding), side="left")
    return tf.RaggedTensor.from_tensor(tf.cast(found, tf.int64), lengths=byte_offsets.row_lengths())
