"""The token cache: blocks on disk that every epoch, resumed run and worker reads."""

import os

import pytest
from conftest import labelled_rows, write_csv

from trainer import config as config_lib
from trainer.data import splits, token_cache
from trainer.modeling.encoders import registry
from trainer.modeling.encoders.tokenizers.word_piece import WordPiecePreprocessor


@pytest.fixture(scope="module")
def preprocessor(tiny_encoder_dir):
    from trainer.modeling import encoders

    return encoders.load_encoder(tiny_encoder_dir, seq_length=16).preprocessor


def datasets_of(tmp_path, rows=40):
    train = write_csv(tmp_path / "train.csv", labelled_rows(rows, 1))
    validation = write_csv(tmp_path / "validation.csv", labelled_rows(12, 2))
    config = config_lib.build_config(
        ["--training-file", train, "--validation-file", validation, "--min-examples-per-class", "1"], {}
    )
    return splits.load_datasets(config)


def rows_of(dataset):
    """Each row as (its token ids, its label), in the order the dataset yields them."""
    return [(tuple(features["input_word_ids"].numpy()), int(label)) for features, label, _ in dataset]


def test_blocks_hold_every_row_in_order_with_its_label(tmp_path, preprocessor, monkeypatch):
    monkeypatch.setattr(token_cache, "BLOCK_ROWS", 8)
    data = datasets_of(tmp_path)
    train = token_cache.load_or_build(data, preprocessor, str(tmp_path / "cache"), 16)["train"]
    assert len(train.blocks) == 5 and len(train) == 40
    rows = rows_of(train.examples())
    assert [label for _, label in rows] == data.train.labels.tolist()
    assert [len(ids) for ids, _ in rows] == train.lengths.tolist()


@pytest.mark.parametrize("block_rows", [8, 64], ids=["by block", "by row"])
def test_worker_shares_are_disjoint_and_cover_the_split(tmp_path, preprocessor, monkeypatch, block_rows):
    monkeypatch.setattr(token_cache, "BLOCK_ROWS", block_rows)
    train = token_cache.load_or_build(datasets_of(tmp_path), preprocessor, str(tmp_path / "c"), 16)["train"]
    whole = rows_of(train.examples())
    shares = [rows_of(train.examples(seed=3, shard=(index, 2))) for index in range(2)]
    assert sorted(shares[0] + shares[1]) == sorted(whole)
    if block_rows == 8:  # whole blocks: 5 blocks -> 3 and 2
        assert sorted(len(share) for share in shares) == [16, 24]


def test_a_second_run_reuses_the_cache_and_changed_data_gets_a_new_one(tmp_path, preprocessor, caplog):
    data = datasets_of(tmp_path)
    first = token_cache.load_or_build(data, preprocessor, str(tmp_path / "cache"), 16)["train"]
    with caplog.at_level("INFO", logger="trainer"):
        again = token_cache.load_or_build(data, preprocessor, str(tmp_path / "cache"), 16)["train"]
    assert "token cache: reusing" in caplog.text and again.blocks == first.blocks
    changed = datasets_of(tmp_path, rows=41)
    other = token_cache.load_or_build(changed, preprocessor, str(tmp_path / "cache"), 16)["train"]
    assert other.blocks[0] != first.blocks[0] and len(other) == 41


def test_shuffled_epochs_differ_but_repeat_for_the_same_seed(tmp_path, preprocessor):
    train = token_cache.load_or_build(datasets_of(tmp_path), preprocessor, str(tmp_path / "c"), 16)["train"]
    assert rows_of(train.examples(seed=1)) == rows_of(train.examples(seed=1))
    assert rows_of(train.examples(seed=1)) != rows_of(train.examples(seed=2))
    assert sorted(rows_of(train.examples(seed=1))) == sorted(rows_of(train.examples()))


def test_some_rows_are_read_alone_in_order(tmp_path, preprocessor, monkeypatch):
    from trainer.data import input_pipeline

    monkeypatch.setattr(token_cache, "BLOCK_ROWS", 8)
    train = token_cache.load_or_build(datasets_of(tmp_path), preprocessor, str(tmp_path / "c"), 16)["train"]
    picked = train.take([0, 9, 10, 39])
    whole = rows_of(train.examples())
    assert rows_of(picked.examples()) == [whole[i] for i in (0, 9, 10, 39)]
    batching = input_pipeline.Batching(3, input_pipeline.padded_lengths(16), bucket=True)
    batches = list(input_pipeline.evaluation_dataset(picked, batching))
    assert sum(len(labels) for _, labels, _ in batches) == 4


def test_the_cache_key_follows_what_the_tokenizer_does():
    """Equal tokenizers share a cache; casing (seen on the probes) makes another one."""
    vocab = os.path.join(registry.packaged_default_dir(), "vocab.txt")
    uncased = token_cache.tokenizer_fingerprint(WordPiecePreprocessor(vocab, lower_case=True), pairs=False)
    assert token_cache.tokenizer_fingerprint(WordPiecePreprocessor(vocab, lower_case=True), pairs=False) == uncased
    assert token_cache.tokenizer_fingerprint(WordPiecePreprocessor(vocab, lower_case=False), pairs=False) != uncased


def test_the_cache_key_follows_how_the_tokenizer_reads_control_characters():
    """Tokens cached before WordPiece deleted format characters (issue #66: it split words at a
    soft hyphen) are not reused by a run after."""
    import tensorflow as tf

    class SplittingAtSoftHyphens(WordPiecePreprocessor):
        def tokenize(self, strings):
            return super().tokenize(tf.strings.regex_replace(strings, "\u00ad", " "))

    vocab = os.path.join(registry.packaged_default_dir(), "vocab.txt")
    fixed = token_cache.tokenizer_fingerprint(WordPiecePreprocessor(vocab, lower_case=True), pairs=False)
    assert token_cache.tokenizer_fingerprint(SplittingAtSoftHyphens(vocab, lower_case=True), pairs=False) != fixed
