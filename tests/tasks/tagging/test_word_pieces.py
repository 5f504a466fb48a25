"""Words to model inputs for token classification (trainer/tasks/tagging/word_pieces.py):
each word's pieces from the family's tokenizer, and the position of its first piece."""

import os

import tensorflow as tf

from trainer.modeling.encoders import registry
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor
from trainer.tasks.tagging.word_pieces import pack_words

WORDS = [["Unbelievably", "great", "!"], ["Saunders", "(", "St.", "Lawrence", ")"]]


def preprocessor():
    return WordPiecePreprocessor(os.path.join(registry.packaged_default_dir(), "vocab.txt"), lower_case=True)


def packed(seq_length=32):
    return pack_words(preprocessor(), tf.ragged.constant(WORDS), seq_length)


def test_wordpiece_words_pack_as_their_sentence_does():
    inputs, pre = packed(), preprocessor()
    sentences = pre.tokenize(tf.constant([" ".join(words) for words in WORDS]))
    expected = pre.bert_pack_inputs([sentences], seq_length=32)["input_word_ids"]
    assert inputs["input_word_ids"].numpy().tolist() == expected.numpy().tolist()


def test_each_words_position_holds_its_first_piece():
    inputs, pre = packed(), preprocessor()
    for row, words in enumerate(WORDS):
        firsts = [pre.tokenize(tf.constant([word])).merge_dims(1, -1)[0, 0].numpy() for word in words]
        positions = inputs["word_positions"][row].numpy()
        assert inputs["input_word_ids"][row].numpy()[positions].tolist() == firsts


def test_a_word_with_several_pieces_moves_the_next_words_position():
    pre = preprocessor()
    pieces = pre.tokenize(tf.constant(["Unbelievably"])).merge_dims(1, -1).row_lengths().numpy()[0]
    assert pieces > 1
    assert packed()["word_positions"][0].numpy().tolist() == [1, 1 + pieces, 2 + pieces]


def test_words_past_the_sequence_length_have_no_position():
    whole = packed()["word_positions"][1].numpy().tolist()
    cut = packed(seq_length=6)["word_positions"][1].numpy().tolist()  # [CLS], 4 pieces, [SEP]
    assert cut == [p if p <= 4 else -1 for p in whole] and cut[0] == 1 and cut[-1] == -1


def test_a_text_that_fits_is_one_window_packed_as_training_packs_it():
    """The export's windows (pack_word_windows) leave a text that fits as it was: its tags are
    read from the same row as before windows (issue #64)."""
    from trainer.tasks.tagging.word_pieces import pack_word_windows

    whole, windows = packed(), pack_word_windows(preprocessor(), tf.ragged.constant(WORDS), 32, 15)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert windows[name].numpy().tolist() == whole[name].numpy().tolist()
    assert windows["word_window"].to_list() == [[row] * len(words) for row, words in enumerate(WORDS)]
    assert windows["word_positions"].to_list() == whole["word_positions"].to_list()


def test_a_longer_text_is_read_in_windows_each_words_position_holding_its_first_piece():
    from trainer.tasks.tagging.word_pieces import pack_word_windows

    pre = preprocessor()
    inputs = pack_word_windows(pre, tf.ragged.constant(WORDS), 6, 2)  # windows of 4 pieces
    assert inputs["input_word_ids"].shape[0] == 5  # 7 pieces: 3 windows; 6 pieces: 2
    for row, words in enumerate(WORDS):
        firsts = [pre.tokenize(tf.constant([word])).merge_dims(1, -1)[0, 0].numpy() for word in words]
        rows, positions = inputs["word_window"][row].numpy(), inputs["word_positions"][row].numpy()
        assert inputs["input_word_ids"].numpy()[rows, positions].tolist() == firsts
