"""The bi-encoder's rows and model (trainer/tasks/embedding/model.py, data.input_pipeline's sides):
a pair is packed as its two texts each packed alone, one after the other, and the model encodes
each side exactly as the export encodes that text alone."""

import numpy as np
import pytest
import tensorflow as tf

from trainer.data import input_pipeline
from trainer.data.input_pipeline import LongTexts
from trainer.tasks.embedding.model import SplitSides

SIDES = LongTexts(sides=2)


@pytest.fixture
def preprocessor(tiny_encoder_dir):
    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    return WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=8)


def alone(preprocessor, text):
    """A text's real token ids as the export packs it alone."""
    features = preprocessor(tf.constant([text]))
    return features["input_word_ids"][0][features["input_mask"][0] > 0].numpy().tolist()


def test_a_pair_is_its_two_texts_packed_each_alone_each_typed_by_its_side(preprocessor):
    ids, types, lengths, _ = input_pipeline.pack_tokens(
        preprocessor, tf.constant(["i love it"]), tf.constant(["so bad"]), SIDES
    )
    first, second = alone(preprocessor, "i love it"), alone(preprocessor, "so bad")
    assert ids.numpy().tolist() == first + second
    assert types.numpy().tolist() == [0] * len(first) + [1] * len(second)
    assert lengths.numpy().tolist() == [len(first) + len(second)]


def test_a_hard_negative_is_a_third_side_packed_alone_after_the_pair(preprocessor):
    ids, types, _, _ = input_pipeline.pack_tokens(
        preprocessor, tf.constant(["i love it"]), tf.constant(["so bad"]), LongTexts(sides=3), tf.constant(["meh"])
    )
    first, second, third = (alone(preprocessor, t) for t in ("i love it", "so bad", "meh"))
    assert ids.numpy().tolist() == first + second + third
    assert types.numpy().tolist() == [0] * len(first) + [1] * len(second) + [2] * len(third)


def test_each_side_is_cut_alone_and_the_full_length_is_the_longest_sides(preprocessor):
    texts, pairs = tf.constant(["i love it " * 4, "so bad"]), tf.constant(["meh", "i love it"])
    _, _, lengths, full = input_pipeline.pack_tokens(preprocessor, texts, pairs, SIDES)
    assert lengths.numpy().tolist() == [8 + 3, 4 + 5]  # the 14-token side cut to 8, the other whole
    assert full.numpy().tolist() == [14, 5]


def test_head_tail_keeps_each_sides_head_and_tail_as_a_text_alone_keeps_them(preprocessor):
    long, short = tf.constant(["i love it so bad " * 3]), tf.constant(["meh"])
    ids, _, lengths, full = input_pipeline.pack_tokens(preprocessor, long, short, LongTexts("head-tail", sides=2))
    first = input_pipeline.pack_tokens(preprocessor, long, None, LongTexts("head-tail"))[0]
    assert ids.numpy()[:8].tolist() == first.numpy().tolist()
    assert ids.numpy()[8:].tolist() == alone(preprocessor, "meh") and full.numpy().tolist() == [17]


def test_the_token_cache_keeps_pairs_packed_apart_from_pairs_packed_together():
    assert LongTexts(sides=2).key() != LongTexts().key()
    assert LongTexts("head-tail", sides=2).key() != LongTexts(sides=2).key()


def test_the_padding_ladder_holds_a_row_of_two_whole_sides():
    assert input_pipeline.padded_lengths(16, SIDES.windows)[-1] == 32


def test_split_sides_gives_each_side_as_a_row_of_its_own(preprocessor):
    ids, types, lengths, _ = input_pipeline.pack_tokens(
        preprocessor, tf.constant(["i love it", "so bad"]), tf.constant(["meh", "i love it , very good"]), SIDES
    )
    ragged = lambda flat: tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor(0, shape=[2, 20])  # noqa: E731
    features = {"input_word_ids": ragged(ids), "input_type_ids": ragged(types), "input_mask": ragged(tf.ones_like(ids))}
    split = {name: t.numpy() for name, t in SplitSides(2)(features).items()}
    texts = ["i love it", "meh", "so bad", "i love it , very good"]  # row b's side s at b * 2 + s
    for row, text in enumerate(texts):
        expected = alone(preprocessor, text)
        assert split["input_word_ids"][row][: len(expected)].tolist() == expected
        assert (
            split["input_mask"][row].sum() == len(expected) and not split["input_word_ids"][row][len(expected) :].any()
        )
    assert not split["input_type_ids"].any()


def test_the_bi_encoder_gives_each_side_the_vector_of_that_text_encoded_alone(tiny_encoder_dir):
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.tasks.embedding.model import build_bi_encoder

    encoder = load_encoder(tiny_encoder_dir, seq_length=8)
    preprocessor = encoder.preprocessor
    sentence_encoder = heads.build_sentence_encoder(encoder.network, "mean")
    model = build_bi_encoder(sentence_encoder, 2)
    ids, types, lengths, _ = input_pipeline.pack_tokens(
        preprocessor, tf.constant(["i love it", "so bad"]), tf.constant(["meh", "i love it , very good"]), SIDES
    )
    ragged = lambda flat: tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor(0)  # noqa: E731
    vectors = model(
        {"input_word_ids": ragged(ids), "input_type_ids": ragged(types), "input_mask": ragged(tf.ones_like(ids))}
    )
    assert vectors.shape == (2, 2, sentence_encoder.output_shape[-1])
    for row, texts in enumerate((("i love it", "meh"), ("so bad", "i love it , very good"))):
        for side, text in enumerate(texts):
            features = {name: tf.cast(t, tf.int32) for name, t in preprocessor(tf.constant([text])).items()}
            np.testing.assert_allclose(vectors[row, side].numpy(), sentence_encoder(features)[0].numpy(), atol=1e-5)


def test_with_windows_each_side_gets_the_vector_of_that_text_read_in_windows_alone(tiny_encoder_dir):
    """A side longer than one window is padded to whole windows before the encoder splits it:
    cut anywhere else, its second window would not start where the text's does."""
    from trainer.modeling import heads
    from trainer.modeling.encoders import load_encoder
    from trainer.tasks.embedding.model import build_bi_encoder

    encoder = load_encoder(tiny_encoder_dir, seq_length=8)
    preprocessor, windows = encoder.preprocessor, LongTexts("windows", 2, 4)
    sentence_encoder = heads.build_sentence_encoder(encoder.network, "mean", (8, "mean"))
    model = build_bi_encoder(sentence_encoder, 2, seq_length=8)
    texts, pairs = ["i love it , very good , so good", "so bad"], ["meh", "i love it"]
    sides = LongTexts("windows", 2, 4, sides=2)
    ids, types, lengths, _ = input_pipeline.pack_tokens(preprocessor, tf.constant(texts), tf.constant(pairs), sides)
    ragged = lambda flat: tf.RaggedTensor.from_row_lengths(flat, lengths).to_tensor(0)  # noqa: E731
    vectors = model(
        {"input_word_ids": ragged(ids), "input_type_ids": ragged(types), "input_mask": ragged(tf.ones_like(ids))}
    )
    for row, pair in enumerate(zip(texts, pairs)):
        for side, text in enumerate(pair):
            features = input_pipeline.encode(preprocessor, tf.constant([text]), long_texts=windows)
            alone_vector = sentence_encoder({name: tf.cast(t, tf.int32) for name, t in features.items()})[0]
            np.testing.assert_allclose(vectors[row, side].numpy(), alone_vector.numpy(), atol=1e-5)
