"""An inconsistent encoder checkpoint is one `error:` line naming the file and the field, before
any network is built: a tokenizer with more ids than vocab_size rows, word embeddings whose rows
are not vocab_size, and config.json fields out of range (issue #49, item 4). Every family's
tiny checkpoint is written once, then copied with one field of its config.json changed.
"""

import json
import re
import shutil

import bert_reference
import hf_reference
import hf_stand_in
import pytest
import tensorflow as tf
import tiny_bert

from trainer.errors import UserError
from trainer.modeling import encoders
from trainer.modeling.encoders import families

FAMILIES = ["bert", "electra", *sorted(hf_reference.families())]


def write(family, directory, vocab_size=None):
    """A tiny checkpoint of `family`, its config and weights `vocab_size` rows when given."""
    if family in ("bert", "electra"):
        config = tiny_bert.CONFIG if family == "bert" else hf_stand_in.ELECTRA_CONFIG
        return tiny_bert.write_hf_checkpoint(directory, {**config, "vocab_size": vocab_size or config["vocab_size"]})
    pytest.importorskip("torch")
    config = hf_reference.families()[family].tiny_config()
    config.vocab_size = vocab_size or config.vocab_size
    return hf_reference.write_checkpoint(family, directory, config)


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    """family -> its tiny checkpoint directory, written once, when first asked for."""
    written = {}

    def directory(family):
        if family not in written:
            written[family] = write(family, tmp_path_factory.mktemp(family))
        return written[family]

    return directory


def edited(source, tmp_path, **changes):
    """A copy of the checkpoint directory `source` with `changes` in its config.json."""
    directory = tmp_path / "checkpoint"
    shutil.copytree(source, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **changes}))
    return str(directory)


def config_of(directory):
    with open(f"{directory}/config.json") as f:
        return json.load(f)


def token_count(directory):
    """How many ids the family's tokenizer gives (its highest id + 1)."""
    family = families.family_of(config_of(directory), "config.json")
    with tf.Graph().as_default():
        return family.preprocessor(f"{directory}/{family.tokenizer_files[0]}", True, 8).vocab_size


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(UserError) as raised:
        call(*args, **kwargs)
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.fixture
def no_network_built(monkeypatch):
    """Fails the test if any encoder network is built."""

    def build(*args, **kwargs):
        raise AssertionError("the network was built before the checkpoint was refused")

    monkeypatch.setattr(families, "build", build)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tokenizer_with_more_ids_than_vocab_size_is_one_error_naming_both_files(family, family_dirs, tmp_path):
    """The issue's case: weights and config.json agree on fewer rows than the tokenizer has
    ids, which failed at the first training step in the embedding lookup."""
    tokens = token_count(family_dirs(family))
    directory = write(family, tmp_path, vocab_size=tokens - 1)
    tokenizer_file = families.family_of(config_of(directory), "").tokenizer_files[0]
    assert one_line_error(encoders.check_encoder, directory) == (
        f"--encoder: {directory}/config.json: vocab_size {tokens - 1} is smaller than the "
        f"{tokens} tokens of {directory}/{tokenizer_file} (ids {tokens - 1} to {tokens - 1} "
        "would have no embedding row): the tokenizer's files do not belong to these weights"
    )


def test_loading_such_a_checkpoint_fails_before_the_network_is_built(tmp_path, no_network_built):
    directory = tiny_bert.write_hf_checkpoint(tmp_path, {**tiny_bert.CONFIG, "vocab_size": 29})
    message = one_line_error(encoders.load_encoder, directory, seq_length=16, cache_dir=str(tmp_path / "cache"))
    assert message.startswith(
        f"--encoder: {directory}/config.json: vocab_size 29 is smaller than the 30 tokens of {directory}/vocab.txt"
    )


def test_a_google_checkpoint_with_more_tokens_than_vocab_size_is_one_error(tmp_path):
    directory = bert_reference.write_google_checkpoint(
        tmp_path / "uncased_L-2_H-16_A-2", {**tiny_bert.CONFIG, "vocab_size": 29}
    )
    message = one_line_error(encoders.check_encoder, directory)
    assert message.startswith(
        f"--encoder: {directory}/bert_config.json: vocab_size 29 is smaller than the 30 tokens of {directory}/vocab.txt"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_vocab_size_unlike_the_word_embeddings_rows_is_one_error(family, family_dirs, tmp_path):
    """Read off the safetensors header: vocab_size above the rows, and above the tokenizer's
    ids too, so nothing else is wrong."""
    source = family_dirs(family)
    rows = config_of(source)["vocab_size"]
    directory = edited(source, tmp_path, vocab_size=rows + 1)
    assert one_line_error(encoders.check_encoder, directory) == (
        f"--encoder: {directory}/config.json: vocab_size {rows + 1} does not match the {rows} "
        f"rows of the word embeddings in {directory}/model.safetensors"
    )


def test_loading_checks_the_word_embeddings_rows_before_building(tmp_path, no_network_built):
    directory = edited(tiny_bert.write_hf_checkpoint(tmp_path / "tiny"), tmp_path, vocab_size=31)
    message = one_line_error(encoders.load_encoder, directory, seq_length=16, cache_dir=str(tmp_path / "cache"))
    assert message == (
        f"--encoder: {directory}/config.json: vocab_size 31 does not match the 30 "
        f"rows of the word embeddings in {directory}/model.safetensors"
    )


def test_an_unreadable_safetensors_file_is_one_error_naming_it(tmp_path):
    directory = tiny_bert.write_hf_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    message = one_line_error(encoders.check_encoder, directory)
    assert message.startswith(f"--encoder: {directory}/model.safetensors is not a readable safetensors file")


# (family, field, bad value, what the error says of it): each crashes later or builds a
# network that computes something else.
BAD_FIELDS = [
    ("bert", "vocab_size", "30", "is not a whole number >= 1"),
    ("bert", "hidden_size", -16, "is not a whole number >= 1"),
    ("bert", "num_hidden_layers", 0, "is not a whole number >= 1"),
    ("bert", "num_attention_heads", 0, "is not a whole number >= 1"),  # was a ZeroDivisionError
    ("bert", "intermediate_size", 0, "is not a whole number >= 1"),
    ("bert", "max_position_embeddings", 0, "is not a whole number >= 1"),
    ("bert", "type_vocab_size", -1, "is not a whole number >= 0"),
    ("bert", "pad_token_id", -1, "is not a whole number >= 0"),
    ("bert", "layer_norm_eps", 0, "is not a number above 0"),
    ("bert", "hidden_dropout_prob", 1.0, r"is not a dropout rate in \[0, 1\)"),
    ("bert", "attention_probs_dropout_prob", -0.1, r"is not a dropout rate in \[0, 1\)"),
    ("electra", "embedding_size", 0, "is not a whole number >= 1"),
    ("modernbert", "global_attn_every_n_layers", 0, "is not a whole number >= 1"),
    ("modernbert", "local_attention", 0, "is not a whole number >= 1"),
    ("modernbert", "norm_eps", -1e-5, "is not a number above 0"),
    ("modernbert", "embedding_dropout", 1, r"is not a dropout rate in \[0, 1\)"),
    ("modernbert", "attention_dropout", 1.5, r"is not a dropout rate in \[0, 1\)"),
    ("modernbert", "mlp_dropout", True, r"is not a dropout rate in \[0, 1\)"),
    ("distilbert", "n_heads", 0, "is not a whole number >= 1"),  # was a ZeroDivisionError
    ("distilbert", "dim", 0, "is not a whole number >= 1"),
    ("distilbert", "n_layers", 0, "is not a whole number >= 1"),
    ("distilbert", "hidden_dim", -1, "is not a whole number >= 1"),
    ("distilbert", "dropout", 1.0, r"is not a dropout rate in \[0, 1\)"),
]


@pytest.mark.parametrize("family,field,value,problem", BAD_FIELDS, ids=[f"{case[0]}-{case[1]}" for case in BAD_FIELDS])
def test_a_config_field_out_of_range_is_one_error_naming_it(family, field, value, problem, family_dirs, tmp_path):
    directory = edited(family_dirs(family), tmp_path, **{field: value})
    message = one_line_error(encoders.check_encoder, directory)
    assert re.fullmatch(
        rf"--encoder: {re.escape(directory)}/config\.json: {field} "
        rf"{re.escape(json.dumps(value))} {problem}",
        message,
    )


def test_a_google_config_field_out_of_range_is_one_error_naming_it(tmp_path):
    directory = bert_reference.write_google_checkpoint(tmp_path / "uncased_L-2_H-16_A-2")
    config = json.loads((tmp_path / "uncased_L-2_H-16_A-2" / "bert_config.json").read_text())
    (tmp_path / "uncased_L-2_H-16_A-2" / "bert_config.json").write_text(
        json.dumps({**config, "num_attention_heads": 0})
    )
    assert one_line_error(encoders.check_encoder, directory) == (
        f"--encoder: {directory}/bert_config.json: num_attention_heads 0 is not a whole number >= 1"
    )


def test_a_padding_id_outside_the_vocabulary_is_one_error(family_dirs, tmp_path):
    directory = edited(family_dirs("bert"), tmp_path, pad_token_id=30)
    assert one_line_error(encoders.check_encoder, directory) == (
        f"--encoder: {directory}/config.json: pad_token_id 30 is not an id of the vocab_size 30 tokens"
    )


def test_roberta_positions_that_leave_no_room_for_text_are_one_error(family_dirs, tmp_path):
    """RoBERTa counts positions from pad_token_id + 1: 2 positions with padding id 1 hold none."""
    directory = edited(family_dirs("roberta"), tmp_path, max_position_embeddings=2)
    assert one_line_error(encoders.check_encoder, directory) == (
        f"--encoder: {directory}/config.json: max_position_embeddings 2 leaves no position for "
        "text: RoBERTa counts positions from pad_token_id 1 + 1"
    )


def test_null_where_transformers_writes_none_is_accepted(family_dirs, tmp_path):
    """No padding token; embeddings as wide as the hidden size."""
    directory = edited(family_dirs("bert"), tmp_path, pad_token_id=None, embedding_size=None)
    encoders.check_encoder(directory)
