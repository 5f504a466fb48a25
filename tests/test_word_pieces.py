"""Words to model inputs for token classification (trainer/modeling/encoders/word_pieces.py):
each word's pieces from the family's tokenizer, and the position of its first piece."""
import os

import tensorflow as tf

from trainer.modeling.encoders import registry
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor
from trainer.modeling.encoders.word_pieces import pack_words

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
