"""`--encoder hf:ORG/NAME[@REVISION]`: Hugging Face Hub repositories, BERT and ELECTRA, in
safetensors or tf_model.h5, served by a stand-in Hub on 127.0.0.1 (tests/helpers/hf_stand_in.py)."""

import json
import os
import subprocess
import sys

import bert_reference
import hf_stand_in as stand_in
import numpy as np
import pytest
import tf_keras
from conftest import metrics_of, without_extras

from trainer.errors import UserError
from trainer.modeling.encoders import check_encoder, load_encoder, registry

BERT_COMMIT, BERT_V1_COMMIT = stand_in.commit_sha("bert main"), stand_in.commit_sha("bert v1")


def bert_files(seed):
    return stand_in.checkpoint_files(
        stand_in.BERT_CONFIG, "model.safetensors", stand_in.safetensors_bytes(stand_in.bert_weights(seed))
    )


def electra_h5_files():
    return stand_in.checkpoint_files(
        stand_in.ELECTRA_CONFIG,
        "tf_model.h5",
        stand_in.h5_bytes(stand_in.electra_weights(), "tf_electra_for_pre_training"),
    )


def electra_safetensors_files():
    return stand_in.checkpoint_files(
        stand_in.ELECTRA_CONFIG, "model.safetensors", stand_in.safetensors_bytes(stand_in.electra_weights())
    )


def pytorch_only_files():
    files = bert_files(0)
    files["pytorch_model.bin"] = files.pop("model.safetensors")
    return files


@pytest.fixture(scope="module")
def hub():
    server = stand_in.StandInHub(
        {
            "tiny/bert": stand_in.Repo(
                {BERT_COMMIT: bert_files(0), BERT_V1_COMMIT: bert_files(1)}, {"main": BERT_COMMIT, "v1": BERT_V1_COMMIT}
            ),
            "tiny/electra": stand_in.Repo(
                {stand_in.commit_sha("electra"): electra_h5_files()}, {"main": stand_in.commit_sha("electra")}
            ),
            "tiny/pytorch-only": stand_in.Repo(
                {stand_in.commit_sha("pt"): pytorch_only_files()}, {"main": stand_in.commit_sha("pt")}
            ),
            "tiny/gated": stand_in.Repo(
                {stand_in.commit_sha("gated"): bert_files(0)}, {"main": stand_in.commit_sha("gated")}, token="hf_reader"
            ),
            # What the registry name all-mpnet-base-v2 resolves to (any checkpoint will do here).
            "sentence-transformers/all-mpnet-base-v2": stand_in.Repo(
                {stand_in.commit_sha("mpnet"): bert_files(2)}, {"main": stand_in.commit_sha("mpnet")}
            ),
        }
    )
    yield server
    server.close()


@pytest.fixture
def env(hub, monkeypatch, tmp_path):
    """The Hub is the stand-in; a fresh encoder cache. Returns the cache directory."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    for name in ("HF_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return str(tmp_path / "cache")


def inputs():
    word_ids = np.array([[2, 5, 6, 9, 3, 0], [2, 14, 16, 3, 0, 0]], np.int32)
    return {
        "input_word_ids": word_ids,
        "input_mask": (word_ids > 0).astype(np.int32),
        "input_type_ids": np.zeros_like(word_ids),
    }


def test_a_hub_bert_computes_what_its_weights_imply(env):
    encoder = load_encoder("hf:tiny/bert", seq_length=16, cache_dir=env)
    expected = bert_reference.forward(stand_in.bert_weights(0), stand_in.BERT_CONFIG, **inputs())
    real = inputs()["input_mask"].astype(bool)
    outputs = encoder.network(inputs())
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-4)
    np.testing.assert_allclose(
        np.asarray(outputs["sequence_output"])[real], expected["sequence_output"][real], atol=1e-4
    )
    assert encoder.source == f"hf:tiny/bert (Hugging Face commit {BERT_COMMIT})"


def test_a_revision_picks_that_revisions_weights(env):
    expected = {"hf:tiny/bert": 0, "hf:tiny/bert@main": 0, "hf:tiny/bert@v1": 1, f"hf:tiny/bert@{BERT_V1_COMMIT}": 1}
    for spec, seed in expected.items():
        table = load_encoder(spec, seq_length=16, cache_dir=env).network.get_layer("word_embeddings")
        np.testing.assert_array_equal(
            table.get_weights()[0], stand_in.bert_weights(seed)["embeddings.word_embeddings.weight"], err_msg=spec
        )


def test_a_second_resolve_downloads_no_file(hub, env):
    first = registry.resolve("hf:tiny/bert", env).path
    before = len(hub.requests)
    second = registry.resolve("hf:tiny/bert", env).path
    assert second == first
    assert [request for request in hub.requests[before:] if "/resolve/" in request[1]] == []


def test_only_the_files_the_encoder_reads_are_downloaded(hub, env):
    path = registry.resolve("hf:tiny/bert", env).path
    assert sorted(os.listdir(path)) == [
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "vocab.txt",
    ]  # no README.md


def test_offline_a_cached_repo_is_used_without_the_hub(env, monkeypatch):
    online = registry.resolve("hf:tiny/bert@v1", env).path
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: refused at once
    assert registry.resolve("hf:tiny/bert@v1", env).path == online


def test_offline_an_uncached_repo_is_one_user_error(env, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(
        UserError,
        match=r"^--encoder hf:tiny/bert needs the network: cannot "
        r"reach 127\.0\.0\.1 .*Run once where the Hub is reachable",
    ):
        registry.resolve("hf:tiny/bert", env)


def test_hf_hub_offline_says_so_of_an_uncached_repo(env, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        UserError,
        match=r"^--encoder hf:tiny/bert needs the network: "
        r"HF_HUB_OFFLINE is set, and the encoder cache ",
    ):
        registry.resolve("hf:tiny/bert", env)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("hf:tiny/missing", r"^--encoder hf:tiny/missing: no model repository tiny/missing on the Hub"),
        ("hf:tiny/bert@v9", r"^--encoder hf:tiny/bert@v9: tiny/bert has no revision v9 "),
        ("hf:tiny/gated", r"^--encoder hf:tiny/gated: tiny/gated is gated: .* set HF_TOKEN"),
        ("hf:tiny", r"^--encoder hf:tiny: expected hf:ORG/NAME or hf:ORG/NAME@REVISION"),
    ],
)
def test_a_repo_that_cannot_be_read_is_one_user_error(env, spec, message):
    with pytest.raises(UserError, match=message) as raised:
        registry.resolve(spec, env)
    assert "\n" not in str(raised.value)


def test_hf_token_opens_a_gated_repo(env, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_reader")
    assert load_encoder("hf:tiny/gated", seq_length=16, cache_dir=env).hidden_size == stand_in.HIDDEN


def test_a_pytorch_only_repo_says_how_to_convert_it(env):
    with pytest.raises(
        UserError,
        match=r"^--encoder hf:tiny/pytorch-only: tiny/pytorch-only holds "
        r"only pytorch_model\.bin.*safe_serialization=True",
    ):
        registry.resolve("hf:tiny/pytorch-only", env)


def test_checking_an_hf_value_before_the_run_needs_no_network(hub):
    before = len(hub.requests)
    check_encoder("hf:tiny/bert@v1")
    assert len(hub.requests) == before


def test_tf_model_h5_gives_the_same_electra_as_its_safetensors(env, tmp_path):
    from_hub_h5 = load_encoder("hf:tiny/electra", seq_length=16, cache_dir=env)
    local = stand_in.write_directory(tmp_path / "electra", electra_safetensors_files())
    from_safetensors = load_encoder(local, seq_length=16)
    fresh_pooler = {"pooler_transform/kernel:0", "pooler_transform/bias:0"}
    for h5_variable, variable in zip(from_hub_h5.network.weights, from_safetensors.network.weights):
        assert h5_variable.name == variable.name
        if variable.name not in fresh_pooler:
            np.testing.assert_array_equal(h5_variable.numpy(), variable.numpy(), err_msg=variable.name)


def test_electra_embeddings_are_normalised_then_projected_to_the_hidden_size(env):
    network = load_encoder("hf:tiny/electra", seq_length=16, cache_dir=env).network
    projected = tf_keras.Model(network.inputs, network.get_layer("embedding_projection").output)
    w = {
        name[len("electra.") :]: value.astype(np.float64)
        for name, value in stand_in.electra_weights().items()
        if name.startswith("electra.")
    }
    ids, length = inputs()["input_word_ids"], inputs()["input_word_ids"].shape[1]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = x * w["embeddings.LayerNorm.weight"] + w["embeddings.LayerNorm.bias"]
    expected = x @ w["embeddings_project.weight"].T + w["embeddings_project.bias"]
    np.testing.assert_allclose(projected(inputs()), expected, atol=1e-5)


def test_electra_has_no_pretrained_pooler_so_cls_pooling_trains_a_fresh_one(env):
    encoder = load_encoder("hf:tiny/electra", seq_length=16, cache_dir=env)
    assert encoder.default_pooling == "cls"
    pooler = encoder.network.get_layer("pooler_transform")
    assert pooler.trainable and pooler.kernel.shape == (stand_in.HIDDEN, stand_in.HIDDEN)
    assert encoder.network(inputs())["pooled_output"].shape == (2, stand_in.HIDDEN)


@pytest.mark.slow  # CI runs it on TensorFlow 2.21 (.ci/run)
def test_a_tiny_training_run_fine_tunes_a_hub_electra_in_bfloat16(hub, tiny_data, tmp_path):
    job_dir = tmp_path / "job"
    args = [
        "--encoder",
        "hf:tiny/electra",
        "--training-file",
        tiny_data["train"],
        "--validation-file",
        tiny_data["validation"],
        "--testing-file",
        tiny_data["test"],
        "--job-dir",
        str(job_dir),
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-seq-length",
        "16",
        "--mixed-precision",
        "bfloat16",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    environ = {**os.environ, "HF_ENDPOINT": hub.url}
    environ.pop("HF_HUB_CACHE", None)
    result = subprocess.run(
        [sys.executable, "-m", "trainer.task", *without_extras("trainer.task", args)],
        capture_output=True,
        text=True,
        timeout=240,
        env=environ,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hf:tiny/electra (Hugging Face commit" in json.dumps(metrics_of(job_dir))
    assert (job_dir / "model" / "saved_model.pb").exists()


def test_a_registry_name_of_a_hub_repository_resolves_through_the_hub(env):
    resolved = registry.resolve("all-mpnet-base-v2", env)
    assert resolved.source == (
        "all-mpnet-base-v2 -> hf:sentence-transformers/all-mpnet-base-v2 "
        f"(Hugging Face commit {stand_in.commit_sha('mpnet')})"
    )
    assert os.path.exists(os.path.join(resolved.path, "model.safetensors"))
