"""A raw string's words with their character offsets, in the graph: the units token
classification tags (issue #52), so that an entity's `start` and `end` index the caller's own
string, accents, emoji and runs of spaces included.

A word is a run of characters between spaces, with each punctuation character a word of its own,
as BERT's BasicTokenizer splits text before WordPiece (and as CoNLL files are tokenized: "Paris"
and "," are two words). A control character (Unicode's Cc: NUL, the other C0 and C1 codes, DEL)
separates words as a space does (issue #64): it is in no word, and the words after it are read
as any others (the CoNLL reader, Python's `str.split`, splits at U+001C-U+001F and U+0085 too).
A format character (Cf, such as a zero-width joiner) is no separator: it stays in its word, and
alone it is a word the tokenizers give no piece. Offsets count Unicode code points, as Python's
`str` indexes them; a caller in a UTF-16 language (JavaScript, Java) counts an emoji outside the
BMP as two.
"""

import tensorflow as tf
import tensorflow_text as text

# Unicode separators, ASCII whitespace (RE2's \s is ASCII only) and control characters.
_SPACES = r"[\s\p{Z}\p{Cc}]+"
# BERT's _is_punctuation: every Unicode P* character and the ASCII symbols outside letters/digits.
_PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"


def split_words(strings: tf.Tensor):
    """(words [B, (W)] string, starts [B, (W)] int64, ends [B, (W)] int64) of [B] UTF-8
    strings; `starts` and `ends` are code-point offsets, `ends` exclusive."""
    # TF-Text's regex_split reads a text only up to its first NUL (it takes it as a C string:
    # tokenizers/byte_pair.py); U+0001, a control character of the same one byte, separates
    # words as NUL does, so the offsets stay those of the caller's string.
    separated = tf.strings.regex_replace(strings, r"\x00", "\x01")
    words, byte_starts, byte_ends = text.regex_split_with_offsets(separated, f"{_SPACES}|{_PUNCTUATION}", _PUNCTUATION)
    _, char_starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
    return words, _char_offsets(byte_starts, char_starts), _char_offsets(byte_ends, char_starts)


def _char_offsets(byte_offsets: tf.RaggedTensor, char_starts: tf.RaggedTensor) -> tf.RaggedTensor:
    """Byte offsets [B, (W)] as code-point offsets: how many characters start before each."""
    padding = tf.int64.max
    starts = char_starts.to_tensor(default_value=padding)
    found = tf.searchsorted(starts, byte_offsets.to_tensor(default_value=padding), side="left")
    return tf.RaggedTensor.from_tensor(tf.cast(found, tf.int64), lengths=byte_offsets.row_lengths())
