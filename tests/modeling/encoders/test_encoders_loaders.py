"""Each weight loader puts a checkpoint into the native encoder so that it computes BERT.

The same tiny random weights are written in each format; the encoder's outputs must match the
independent float64 numpy forward pass in tests/helpers/bert_reference.py within 1e-4. Google's
checkpoints and TF-Hub's Model Garden SavedModels use the tanh approximation of GELU, Hugging
Face's "gelu" is exact: the reference uses the matching form, and the two differ by ~4e-4 here,
so a loader picking the wrong one fails.
"""

import json
import os

import bert_reference
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tiny_bert

from trainer.errors import UserError
from trainer.modeling.encoders import load_encoder
from trainer.modeling.encoders.hub import save_encoder_savedmodel

TOLERANCE = 1e-4


def encoder_inputs():
    """Three rows: one with two segments, two padded to different lengths."""
    rng = np.random.default_rng(7)
    word_ids = rng.integers(5, len(tiny_bert.VOCAB), size=(3, 9)).astype(np.int32)
    mask = np.ones((3, 9), np.int32)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    type_ids = np.zeros((3, 9), np.int32)
    type_ids[0, 5:] = 1
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def assert_matches_reference(encoder, gelu_approximate):
    inputs = encoder_inputs()
    outputs = encoder.network(inputs)
    expected = bert_reference.forward(
        tiny_bert.hf_weights(),
        tiny_bert.CONFIG,
        inputs["input_word_ids"],
        inputs["input_mask"],
        inputs["input_type_ids"],
        gelu_approximate=gelu_approximate,
    )
    real = inputs["input_mask"].astype(bool)  # padded positions are not defined by BERT
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=TOLERANCE)
    np.testing.assert_allclose(
        np.asarray(outputs["sequence_output"])[real], expected["sequence_output"][real], atol=TOLERANCE
    )
    assert len(outputs["encoder_outputs"]) == tiny_bert.CONFIG["num_hidden_layers"]
    for layer, expected_layer in zip(outputs["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(np.asarray(layer)[real], expected_layer[real], atol=TOLERANCE)


@pytest.fixture(scope="module")
def google_dir(tmp_path_factory):
    return bert_reference.write_google_checkpoint(tmp_path_factory.mktemp("uncased_L-2_H-16_A-2"))


def test_hugging_face_checkpoint_matches_reference(tiny_encoder_dir):
    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    assert_matches_reference(encoder, gelu_approximate=False)


def test_google_checkpoint_matches_reference(google_dir):
    encoder = load_encoder(google_dir, seq_length=16)
    assert_matches_reference(encoder, gelu_approximate=True)


def test_tf_hub_savedmodel_matches_reference(tiny_encoder_dir, tmp_path):
    saved_model = str(tmp_path / "encoder")
    native = load_encoder(tiny_encoder_dir, seq_length=16)
    save_encoder_savedmodel(native.network, saved_model, native.preprocessor.vocab_file, True)
    encoder = load_encoder(saved_model, seq_length=16)
    assert encoder.backend == "native"
    assert_matches_reference(encoder, gelu_approximate=False)


def test_tf_hub_savedmodel_without_config_asset_is_read_as_model_garden_bert(google_dir, tmp_path):
    """TF-Hub's BERTs carry no config: the shapes give the architecture, GELU is tanh-approximated."""
    native = load_encoder(google_dir, seq_length=16)
    # The same layers as a plain functional model save like a Model Garden export, config-less.
    plain = tf_keras.Model(native.network.inputs, native.network.outputs)
    saved_model = str(tmp_path / "encoder")
    save_encoder_savedmodel(plain, saved_model, native.preprocessor.vocab_file, True)
    assert not os.path.exists(os.path.join(saved_model, "assets", "encoder_config.json"))
    encoder = load_encoder(saved_model, seq_length=16)
    assert encoder.network.encoder_config == native.network.encoder_config
    assert_matches_reference(encoder, gelu_approximate=True)


def test_an_export_with_the_earlier_bert_config_file_asset_keeps_its_config(tiny_encoder_dir, tmp_path):
    """Encoder exports written before issue #50 name their config asset bert_config_file: it is
    read as encoder_config_file is, not guessed from the variables' shapes."""
    import dataclasses

    from trainer.modeling.encoders import checkpoints

    native = load_encoder(tiny_encoder_dir, seq_length=16)
    config = dataclasses.replace(native.network.encoder_config, layer_norm_eps=1e-5)
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps(dataclasses.asdict(config)))
    root = tf.train.Checkpoint(variables=list(native.network.variables))
    root.bert_config_file = tf.saved_model.Asset(str(config_file))
    tf.saved_model.save(root, str(tmp_path / "encoder"))
    assert checkpoints.read_hub_savedmodel(str(tmp_path / "encoder")).config == config


def test_any_sequence_length_up_to_seq_length_gives_the_same_outputs(tiny_encoder_dir):
    """The trainer trims each batch to its longest row; padding must not change real positions."""
    encoder = load_encoder(tiny_encoder_dir, seq_length=16)
    packed = encoder.preprocessor(tf.constant(["i love this movie !", "it was bad"]))
    trimmed = {key: value[:, :7] for key, value in packed.items()}
    full, short = encoder.network(packed), encoder.network(trimmed)
    np.testing.assert_allclose(full["pooled_output"], short["pooled_output"], atol=1e-6)
    np.testing.assert_allclose(full["sequence_output"][:, :7], short["sequence_output"], atol=1e-6)


def test_casing_follows_the_checkpoints_tokenizer_config(tmp_path):
    directory = tiny_bert.write_hf_checkpoint(tmp_path / "cased")
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False}, f)
    encoder = load_encoder(directory, seq_length=8)
    ids = encoder.preprocessor(tf.constant(["Love love"]))["input_word_ids"][0, 1:3].numpy()
    assert ids.tolist() == [tiny_bert.VOCAB.index("[UNK]"), tiny_bert.VOCAB.index("love")]


def test_a_directory_without_checkpoint_files_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="config.json \\+ model.safetensors"):
        load_encoder(str(tmp_path))


def test_a_hugging_face_directory_without_safetensors_is_a_user_error(tmp_path):
    directory = tiny_bert.write_hf_checkpoint(tmp_path / "pickled")
    os.remove(os.path.join(directory, "model.safetensors"))
    with pytest.raises(UserError, match="missing model.safetensors"):
        load_encoder(directory)


def test_a_config_of_no_native_family_is_a_user_error_for_the_native_backend(tmp_path):
    directory = tiny_bert.write_hf_checkpoint(tmp_path / "gpt2", config={**tiny_bert.CONFIG, "model_type": "gpt2"})
    with pytest.raises(
        UserError, match="gpt2 model; the native backend reads model_type bert, .*--encoder-backend hub"
    ):
        load_encoder(directory)


def test_a_seq_length_beyond_the_position_embeddings_is_a_user_error(tiny_encoder_dir):
    with pytest.raises(UserError, match="--max-seq-length 128 exceeds the 64 positions"):
        load_encoder(tiny_encoder_dir, seq_length=128)


def test_checkpoints_are_read_through_tf_io_gfile_so_remote_urls_work(tiny_encoder_dir):
    """TF's in-memory ram:// filesystem stands in for gs://: no local-only file API may touch it.
    (Google and SavedModel layouts go through tf.train.load_checkpoint, which reads gs:// but
    mistakes ram:// checkpoint prefixes for directories, so this covers the Hugging Face layout.)"""
    remote = "ram://checkpoints/tiny_bert"
    tf.io.gfile.makedirs(remote)
    for name in tf.io.gfile.listdir(tiny_encoder_dir):
        tf.io.gfile.copy(os.path.join(tiny_encoder_dir, name), f"{remote}/{name}", overwrite=True)
    encoder = load_encoder(remote, seq_length=16)
    assert encoder.source == remote
    assert_matches_reference(encoder, gelu_approximate=False)
