"""Words to model inputs for token classification: each word split by the family's own
tokenizer, in the graph, and the position of its first piece, where its tag is read and learned
(Devlin et al. 2019, section 5.3: "we use the representation of the first sub-token"; Hugging
Face's run_ner labels the same piece and ignores the rest).

Each word is tokenized on its own, as Hugging Face tokenizes words given with
`is_split_into_words=True` (the preprocessor's `tokenize_words`: byte-level BPE reads each after
a space): each word's pieces equal those Hugging Face's `word_ids()` group, for WordPiece
(tests/modeling/encoders/test_word_pieces.py), byte-level BPE and SentencePiece (the words tests of
tests/modeling/encoders/test_tokenizer_byte_pair.py and test_tokenizer_sentencepiece.py).

Training packs each sentence in one row (`pack_words`): a word cut (past `seq_length` with the
special tokens) or without a piece (a lone zero-width joiner) has position -1. An export reads a
text of any length (`pack_word_windows`): its pieces in overlapping windows of one row each, and
each word read in one of them (word_windows); only a word without a piece has none.
"""

import tensorflow as tf

from trainer.tasks.tagging import word_windows


def _pieces(preprocessor, words: tf.RaggedTensor):
    """(pieces [B, (W), (P)] of `words` [B, (W)], each word's first piece's offset among its
    text's pieces [B, (W)] and its piece count [B, (W)], int32)."""
    pieces = words.with_flat_values(preprocessor.tokenize_words(words.flat_values))
    counts = tf.cast(pieces.row_lengths(axis=2), tf.int32)
    dense = counts.to_tensor()
    firsts = tf.math.cumsum(dense, axis=1, exclusive=True)
    return pieces, tf.RaggedTensor.from_tensor(firsts, lengths=counts.row_lengths()), counts


def pack_words(preprocessor, words: tf.RaggedTensor, seq_length: int) -> dict:
    """Model inputs [B, seq_length] of `words` [B, (W)] (strings), one segment per row, plus
    `word_positions` [B, (W)] int32: each word's first piece in `input_word_ids`, or -1, and
    `pieces` [B]: each row's pieces before the cut, special tokens left out."""
    pieces, firsts, counts = _pieces(preprocessor, words)
    inputs = preprocessor.bert_pack_inputs([pieces], seq_length=seq_length)
    # The first piece of word j follows [CLS] (or the family's start) and the pieces before j.
    starts = 1 + firsts
    fits = (counts > 0) & (starts <= seq_length - 2)  # room for the end token after it
    inputs["word_positions"] = tf.where(fits, starts, -1)
    inputs["pieces"] = tf.reduce_sum(counts, axis=1)
    return inputs


def pack_word_windows(preprocessor, words: tf.RaggedTensor, seq_length: int, overlap: int) -> dict:
    """Model inputs [N, seq_length] of `words` [B, (W)] (strings): each text's pieces in windows
    of seq_length - 2 pieces, consecutive ones sharing `overlap`, a row each, a text's rows
    consecutive (word_windows). Plus, per word [B, (W)] int64, `word_window`: the row it is
    read in, and `word_positions`: its first piece's position in that row; -1 for a word
    without a piece."""
    budget = seq_length - 2  # the start and end tokens, as pack_words leaves room for
    pieces, firsts, counts = _pieces(preprocessor, words)
    windows, per_text = word_windows.split(pieces, budget, overlap)
    inputs = preprocessor.bert_pack_inputs([windows], seq_length=seq_length)
    window, offset = word_windows.reading_windows(firsts, per_text, budget, overlap)
    text_rows = tf.expand_dims(tf.math.cumsum(per_text, exclusive=True), 1)  # each text's first row
    placed, none = counts > 0, tf.constant(-1, tf.int64)
    inputs["word_window"] = tf.where(placed, window + text_rows, none)
    inputs["word_positions"] = tf.where(placed, 1 + offset, none)
    return inputs
