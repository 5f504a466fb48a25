"""Words to model inputs for token classification: each word split by the family's own
tokenizer, in the graph, and the position of its first piece, where its tag is read and learned
(Devlin et al. 2019, section 5.3: "we use the representation of the first sub-token"; Hugging
Face's run_ner labels the same piece and ignores the rest).

Each word is tokenized on its own, as Hugging Face tokenizes words given with
`is_split_into_words=True` (the preprocessor's `tokenize_words`: byte-level BPE reads each after
a space): each word's pieces equal those Hugging Face's `word_ids()` group, for WordPiece
(tests/test_word_pieces.py), byte-level BPE and SentencePiece (the words tests of
tests/test_tokenizer_byte_pair.py and test_tokenizer_sentencepiece.py). A word that is cut (past
`seq_length` with the special tokens) or that has no piece (a control character) has position -1.
"""
import tensorflow as tf


def pack_words(preprocessor, words: tf.RaggedTensor, seq_length: int) -> dict:
    """Model inputs [B, seq_length] of `words` [B, (W)] (strings), one segment per row, plus
    `word_positions` [B, (W)] int32: each word's first piece in `input_word_ids`, or -1, and
    `pieces` [B]: each row's pieces before the cut, special tokens left out."""
    pieces = words.with_flat_values(preprocessor.tokenize_words(words.flat_values))  # [B, (W), (P)]
    inputs = preprocessor.bert_pack_inputs([pieces], seq_length=seq_length)
    counts = tf.cast(pieces.row_lengths(axis=2), tf.int32)  # pieces per word
    dense = counts.to_tensor()
    # The first piece of word j follows [CLS] (or the family's start) and the pieces before j.
    starts = 1 + tf.math.cumsum(dense, axis=1, exclusive=True)
    fits = (dense > 0) & (starts <= seq_length - 2)  # room for the end token after it
    positions = tf.where(fits, starts, -1)
    inputs["word_positions"] = tf.RaggedTensor.from_tensor(positions, lengths=counts.row_lengths())
    inputs["pieces"] = tf.reduce_sum(dense, axis=1)
    return inputs
