"""The tf.data pipeline: every example once, few distinct shapes, exact step counts."""

import numpy as np
import pytest

from trainer.data import input_pipeline


def split_of(lengths, labels=None):
    lengths = np.asarray(lengths, np.int32)
    word_ids = np.concatenate([np.arange(1, n + 1) for n in lengths]).astype(np.int32)
    labels = np.arange(len(lengths)) % 3 if labels is None else labels
    return input_pipeline.TokenizedSplit(
        word_ids, np.zeros_like(word_ids), lengths, np.asarray(labels, np.int32), np.ones(len(lengths), np.float32)
    )


LENGTHS = np.random.default_rng(0).integers(3, 60, size=101)


def batches(dataset):
    return list(dataset.as_numpy_iterator())


def test_padded_lengths_form_a_short_ladder_ending_at_the_maximum():
    assert input_pipeline.padded_lengths(128) == (8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80, 96, 128)
    assert input_pipeline.padded_lengths(30) == (8, 12, 16, 20, 24, 28, 30)


def test_bucketed_training_batches_use_only_ladder_lengths_and_fit_every_row():
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(64), bucket=True)
    out = batches(input_pipeline.training_dataset(split_of(LENGTHS), batching, seed=1, first_epoch=0, epochs=1))
    ladder = np.asarray(batching.lengths)
    for features, _, _ in out:
        real = features["input_mask"].sum(axis=1)
        assert (real == (features["input_word_ids"] > 0).sum(axis=1)).all()
        # Padded to the shortest ladder length its longest row fits, whatever the shuffle put
        # together (which rows share a batch depends on the process's global seed).
        assert features["input_word_ids"].shape[1] == ladder[ladder >= real.max()].min()


def test_steps_per_epoch_is_exact_for_buckets_and_fixed_padding():
    split = split_of(LENGTHS)
    for bucket in (True, False):
        batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(64), bucket=bucket)
        out = batches(input_pipeline.training_dataset(split, batching, seed=3, first_epoch=0, epochs=2))
        assert len(out) == 2 * batching.steps(split)
        assert sum(len(labels) for _, labels, _ in out) == 2 * len(split)


def sides_split(first, second, seq_length):
    """Rows of two texts packed each alone (type id = side) of these token counts, cut at
    seq_length as packing cuts them: full_lengths their longer text's uncut count."""
    cut = np.minimum(first, seq_length), np.minimum(second, seq_length)
    types = np.concatenate([np.repeat([0, 1], [a, b]) for a, b in zip(*cut)]).astype(np.int32)
    split = split_of(cut[0] + cut[1])
    split.type_ids, split.full_lengths = types, np.maximum(first, second).astype(np.int32)
    return split


def test_rows_of_sides_are_bucketed_by_their_longest_text_as_the_bi_encoder_pads_them():
    # Total 12 tokens each, longest texts 9 (bucket 2 x 9 -> 20) and 6 (bucket 12): two batches.
    split = sides_split(np.array([3, 6, 3, 6]), np.array([9, 6, 9, 6]), 32)
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(32, 2), bucket=True, sides=2)
    out = batches(input_pipeline.training_dataset(split, batching, seed=1, first_epoch=0, epochs=1))
    assert batching.steps(split) == len(out) == 2
    longest = [max(np.bincount(t[m > 0]).max() for t, m in zip(f["input_type_ids"], f["input_mask"])) for f, *_ in out]
    assert sorted(longest) == [6, 9]


def test_steps_of_rows_of_sides_are_exact_whatever_their_cut():
    rng = np.random.default_rng(2)
    split = sides_split(rng.integers(3, 50, 101), rng.integers(3, 50, 101), 32)
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(32, 2), bucket=True, sides=2)
    out = batches(input_pipeline.training_dataset(split, batching, seed=3, first_epoch=0, epochs=1))
    assert len(out) == batching.steps(split) and sum(len(labels) for _, labels, _ in out) == len(split)


def test_each_epoch_is_shuffled_and_a_resumed_epoch_repeats_exactly():
    split = split_of(LENGTHS, labels=np.arange(len(LENGTHS)) % 7)
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(64), bucket=True)
    full = batches(input_pipeline.training_dataset(split, batching, seed=5, first_epoch=0, epochs=2))
    steps = batching.steps(split)
    resumed = batches(input_pipeline.training_dataset(split, batching, seed=5, first_epoch=1, epochs=2))
    order = lambda bs: np.concatenate([labels for _, labels, _ in bs]).tolist()  # noqa: E731
    assert order(full[steps:]) == order(resumed)
    assert order(full[:steps]) != order(full[steps:])


def test_training_batches_can_be_built_under_a_global_seed_of_0():
    """`--seed 0` makes 0 TensorFlow's global seed, under which tf.data rejects a shuffle seed
    computed from a tensor, such as an epoch index inside Dataset.flat_map. The global seed is
    put back afterwards, so no other test's randomness changes."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    split = split_of(LENGTHS)
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(64), bucket=True)
    previous = context.global_seed()
    tf.random.set_seed(0)
    try:
        out = batches(input_pipeline.training_dataset(split, batching, seed=0, first_epoch=0, epochs=2))
    finally:
        tf.random.set_seed(previous)
    assert sum(len(labels) for _, labels, _ in out) == 2 * len(split)


def test_padded_evaluation_covers_every_example_once_with_static_shapes():
    split = split_of(LENGTHS)
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(64), bucket=False)
    dataset = input_pipeline.evaluation_dataset(split, batching, pad_to_full_batches=True)
    features_spec = dataset.element_spec[0]["input_word_ids"]
    assert features_spec.shape.as_list() == [16, 64]
    out = batches(dataset)
    weights = np.concatenate([w for _, _, w in out])
    assert len(weights) == 112 and weights.sum() == len(split)
    real_labels = np.concatenate([y[w > 0] for _, y, w in out])
    assert sorted(real_labels.tolist()) == sorted(split.labels.tolist())


def test_padded_evaluation_of_a_split_that_fills_whole_batches_keeps_the_static_shape_and_every_row():
    split = split_of(LENGTHS[:96])
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(64), bucket=False)
    dataset = input_pipeline.evaluation_dataset(split, batching, pad_to_full_batches=True)
    assert dataset.element_spec[0]["input_word_ids"].shape.as_list() == [16, 64]
    assert dataset.element_spec[2].shape.as_list() == [16]
    out = batches(dataset)
    weights = np.concatenate([w for _, _, w in out])
    assert len(out) == 6 and weights.tolist() == [1.0] * 96
    assert sorted(np.concatenate([y for _, y, _ in out]).tolist()) == sorted(split.labels.tolist())


@pytest.mark.parametrize("bucket, pad", [(True, False), (False, True)])
def test_evaluation_rows_carry_their_row_number_through_length_buckets(bucket, pad):
    # The report pairs each prediction with its text; buckets reorder the rows.
    split = split_of(LENGTHS)
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(64), bucket=bucket)
    out = batches(input_pipeline.evaluation_dataset(split, batching, pad_to_full_batches=pad))
    rows = np.concatenate([f["row"][w > 0] for f, _, w in out])
    lengths = np.concatenate([f["input_mask"].sum(axis=1)[w > 0] for f, _, w in out])
    assert sorted(rows.tolist()) == list(range(len(split)))
    assert lengths.tolist() == split.lengths[rows].tolist()
    assert (rows.tolist() != sorted(rows.tolist())) == bucket


@pytest.mark.parametrize("bucket, pad", [(True, False), (False, False), (False, True)])
def test_evaluation_datasets_declare_their_exact_number_of_batches(bucket, pad):
    # Keras needs it to predict with steps_per_execution > 1.
    batching = input_pipeline.Batching(16, input_pipeline.padded_lengths(64), bucket=bucket)
    dataset = input_pipeline.evaluation_dataset(split_of(LENGTHS), batching, pad_to_full_batches=pad)
    assert dataset.cardinality().numpy() == len(batches(dataset)) > 0


def test_trim_keeps_serving_batches_at_a_ladder_length():
    import tensorflow as tf

    mask = np.zeros((2, 128), np.int32)
    mask[0, :21] = 1
    features = {
        "input_word_ids": tf.constant(mask * 5),
        "input_mask": tf.constant(mask),
        "input_type_ids": tf.zeros((2, 128), tf.int32),
    }
    trimmed = input_pipeline.trim_to_padded_length(features, input_pipeline.padded_lengths(128))
    assert trimmed["input_word_ids"].shape == (2, 24)


@pytest.mark.parametrize("drop_remainder, expected", [(False, 4), (True, 3)])
def test_fixed_padding_steps_follow_drop_remainder(drop_remainder, expected):
    batching = input_pipeline.Batching(8, (32,), bucket=False, drop_remainder=drop_remainder)
    assert batching.steps(split_of([5] * 30)) == expected


def test_a_cut_rows_full_length_counts_every_token_and_the_special_ones(tiny_encoder_dir):
    import tensorflow as tf

    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    preprocessor = WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=8)
    texts = tf.constant(["i love it", "i love it " * 4])  # 3 and 12 words of the vocabulary
    _, _, lengths, full = input_pipeline.pack_tokens(preprocessor, texts)
    assert lengths.numpy().tolist() == [5, 8] and full.numpy().tolist() == [5, 14]
    _, _, lengths, full = input_pipeline.pack_tokens(preprocessor, texts, tf.constant(["so bad", "so bad"]))
    assert lengths.numpy().tolist() == [8, 8] and full.numpy().tolist() == [8, 17]  # [CLS] a [SEP] b [SEP]


def test_splits_tokenized_together_equal_splits_tokenized_apart(tiny_encoder_dir):
    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    preprocessor = WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=16)
    texts = {"a": ["i love it", "so bad !"], "b": ["meh"], "c": ["the movie is ok , very ok"]}
    together = input_pipeline.tokenize_splits({n: (t, [0] * len(t), None) for n, t in texts.items()}, preprocessor)
    apart = input_pipeline.tokenize(texts["c"], preprocessor)  # the last split, after the others' rows
    assert together["c"].lengths.tolist() == apart.lengths.tolist()
    assert together["c"].word_ids.tolist() == apart.word_ids.tolist()
    assert [len(together[n].lengths) for n in texts] == [2, 1, 1]


def test_head_tail_keeps_a_quarter_of_the_budget_from_the_start_and_the_rest_from_the_end():
    import tensorflow as tf

    from trainer.modeling.encoders.preprocessing import keep_head_and_tail

    rows = tf.ragged.constant([list(range(1, 21)), [1, 2, 3, 4, 5], list(range(1, 9))])
    kept = keep_head_and_tail(rows, 8)  # 2 from the start, 6 from the end
    assert kept.to_list() == [[1, 2, 15, 16, 17, 18, 19, 20], [1, 2, 3, 4, 5], list(range(1, 9))]


def test_head_tail_keeps_a_word_split_inputs_ragged_rank_for_hub_packers():
    import tensorflow as tf

    from trainer.modeling.encoders.preprocessing import keep_head_and_tail

    words = tf.ragged.constant([[[1, 2], [3], [4, 5, 6], [7]]], dtype=tf.int32)  # [B, (words), (pieces)]
    kept = keep_head_and_tail(words, 4)
    assert kept.ragged_rank == 2 and kept.dtype == tf.int32
    assert kept.merge_dims(1, -1).to_list() == [[1, 5, 6, 7]]


def test_head_tail_takes_a_budget_per_row():
    import tensorflow as tf

    from trainer.modeling.encoders.preprocessing import keep_head_and_tail

    rows = tf.ragged.constant([list(range(1, 21)), list(range(1, 21))])
    kept = keep_head_and_tail(rows, tf.constant([8, 4]))
    assert kept.to_list() == [[1, 2, 15, 16, 17, 18, 19, 20], [1, 18, 19, 20]]


def test_a_head_tail_pair_shares_the_budget_longest_first_and_each_text_keeps_its_ends(tiny_encoder_dir):
    """Issue #49, 2: --long-texts head-tail on a pair task; the shares are truncation's."""
    import tensorflow as tf

    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    preprocessor = WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=13)
    ids = lambda words: preprocessor.tokenize(tf.constant([words])).merge_dims(1, -1)[0].numpy().tolist()  # noqa: E731
    first = "so good " + "the movie is ok " * 3 + "very bad"  # 16 tokens
    second = "i love it"  # 3: it fits whole; the first text gets the other 13 - 3 - 3 = 7
    features = input_pipeline.encode(preprocessor, tf.constant([first]), tf.constant([second]), "head-tail")
    row = features["input_word_ids"].numpy()[0].tolist()
    cls, sep = preprocessor.special_ids["[CLS]"], preprocessor.special_ids["[SEP]"]
    assert row == [cls, *ids("so"), *ids(first)[-6:], sep, *ids(second), sep]


def test_head_tail_packs_a_long_texts_last_words_and_keeps_its_full_length(tiny_encoder_dir):
    import tensorflow as tf

    from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor

    preprocessor = WordPiecePreprocessor(f"{tiny_encoder_dir}/vocab.txt", lower_case=True, seq_length=8)
    texts = tf.constant(["i love it", "so good " + "the movie is ok " * 3 + "very bad"])
    ids = lambda words: preprocessor.tokenize(tf.constant([words])).merge_dims(1, -1)[0].numpy().tolist()  # noqa: E731
    word_ids, _, lengths, full = input_pipeline.pack_tokens(preprocessor, texts, long_texts="head-tail")
    assert lengths.numpy().tolist() == [5, 8] and full.numpy().tolist() == [5, 18]
    long_row = word_ids.numpy().tolist()[5:]
    # 6 tokens between [CLS] and [SEP]: the first one and the last five
    assert long_row[1:-1] == ids("so") + ids("movie is ok very bad")
    features = input_pipeline.encode(preprocessor, texts, long_texts="head-tail")
    assert features["input_word_ids"].numpy()[1].tolist() == long_row
    assert input_pipeline.encode(preprocessor, texts)["input_word_ids"].numpy()[1][1:3].tolist() == ids("so good")


def test_rows_per_label_batches_runs_of_one_label_each_row_once():
    """Embeddings of labelled texts compare a batch's texts of a class: the batch sampler puts
    runs of 4 rows of a label together (the last run of a label shorter)."""
    labels = np.random.default_rng(1).integers(0, 5, size=len(LENGTHS))
    split = split_of(LENGTHS, labels=labels)
    batching = input_pipeline.Batching(8, input_pipeline.padded_lengths(64), bucket=True, rows_per_label=4)
    out = batches(input_pipeline.training_dataset(split, batching, seed=2, first_epoch=0, epochs=1))
    order = np.concatenate([batch_labels for _, batch_labels, _ in out])
    ladder = np.asarray(batching.lengths)
    for features, _, _ in out:  # no length buckets, but each batch padded to the length that fits it
        longest = features["input_mask"].sum(axis=1).max()
        assert features["input_word_ids"].shape[1] == ladder[ladder >= longest].min()
    assert len(out) == batching.steps(split) and sorted(order) == sorted(labels)
    runs = [len(run) for run in np.split(order, np.flatnonzero(np.diff(order)) + 1)]
    # Runs of 4 (two runs of a label may meet, 8), but one shorter run of each of the 5 labels.
    assert sum(length % 4 != 0 for length in runs) <= 5
