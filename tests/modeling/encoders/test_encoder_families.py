"""Each native encoder family computes what its reference implementation (Hugging Face
transformers' PyTorch model, and its fast tokenizer) computes, from the same files.

The checkpoints are written by transformers with random weights at tiny configs; the published
configs are compared in bench/encoder_parity.py, with committed results.
"""

import hf_reference
import numpy as np
import pytest

pytest.importorskip("torch")

FAMILIES = sorted(hf_reference.families())
SENTENCES = [
    "i love this movie !",
    "the movie was not good , so bad",
    "meh",
    "it is a movie , a very very great movie , i love it so .",
]
PAIRS = [("i love it", "this movie is great"), ("so bad", "it was awful , very awful ?")]


@pytest.fixture(scope="module", params=FAMILIES)
def family_dir(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, hf_reference.write_checkpoint(request.param, directory)


def _ours(directory, seq_length=32):
    from trainer.modeling.encoders import load_encoder

    return load_encoder(directory, seq_length=seq_length, cache_dir=str(directory))


def _reference_features(directory, texts, pairs=None, max_length=32):
    tokenizer = hf_reference.fast_tokenizer(directory)
    args = (texts, pairs) if pairs else (texts,)
    encoded = tokenizer(*args, padding="max_length", truncation=True, max_length=max_length)
    return encoded, tokenizer


def test_the_hidden_states_equal_the_reference_on_a_padded_batch(family_dir):
    family, directory = family_dir
    encoded, _ = _reference_features(directory, SENTENCES)
    reference = hf_reference.hidden_states(directory, encoded["input_ids"], encoded["attention_mask"])
    ours = _ours(directory).network(
        {
            "input_word_ids": np.array(encoded["input_ids"], np.int32),
            "input_mask": np.array(encoded["attention_mask"], np.int32),
            "input_type_ids": np.zeros_like(encoded["input_ids"], np.int32),
        }
    )
    assert (
        hf_reference.max_difference(ours["sequence_output"], reference["sequence_output"], encoded["attention_mask"])
        <= 1e-4
    )
    if "pooled_output" in reference:
        assert np.max(np.abs(ours["pooled_output"].numpy() - reference["pooled_output"])) <= 1e-4


def test_the_hidden_states_equal_the_reference_on_sentence_pairs(family_dir):
    family, directory = family_dir
    first, second = zip(*PAIRS)
    encoded, _ = _reference_features(directory, list(first), list(second))
    types = encoded.get("token_type_ids")
    reference = hf_reference.hidden_states(directory, encoded["input_ids"], encoded["attention_mask"], types)
    ours = _ours(directory).network(
        {
            "input_word_ids": np.array(encoded["input_ids"], np.int32),
            "input_mask": np.array(encoded["attention_mask"], np.int32),
            "input_type_ids": np.array(types if types is not None else np.zeros_like(encoded["input_ids"]), np.int32),
        }
    )
    assert (
        hf_reference.max_difference(ours["sequence_output"], reference["sequence_output"], encoded["attention_mask"])
        <= 1e-4
    )


@pytest.mark.parametrize("max_length", [32, 7])
def test_the_preprocessor_gives_the_fast_tokenizers_ids_for_texts_and_pairs(family_dir, max_length):
    """Special tokens, pair layout, round-robin truncation and padding included."""
    import tensorflow as tf

    from trainer.data import input_pipeline

    family, directory = family_dir
    preprocessor = _ours(directory, seq_length=max_length).preprocessor
    encoded, _ = _reference_features(directory, SENTENCES, max_length=max_length)
    ours = preprocessor(tf.constant(SENTENCES))
    assert ours["input_word_ids"].numpy().tolist() == encoded["input_ids"]
    assert ours["input_mask"].numpy().tolist() == encoded["attention_mask"]
    first, second = map(list, zip(*PAIRS))
    encoded, _ = _reference_features(directory, first, second, max_length=max_length)
    ours = input_pipeline.encode(preprocessor, tf.constant(first), tf.constant(second))
    assert ours["input_word_ids"].numpy().tolist() == encoded["input_ids"]
    if "token_type_ids" in encoded:
        assert ours["input_type_ids"].numpy().tolist() == encoded["token_type_ids"]


def test_an_unsupported_model_type_is_one_error_naming_the_supported_ones(tmp_path):
    import json

    from trainer.errors import UserError
    from trainer.modeling.encoders import checkpoints

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(
        UserError,
        match=r"describes a gpt2 model; the native backend reads "
        r"model_type bert, electra, mpnet",
    ):
        checkpoints.check_directory(str(tmp_path))


CHECK_IN_A_FRESH_PROCESS = """
import sys
import trainer
from tensorflow.python.eager import context
from trainer.modeling import encoders
for directory in sys.argv[1:]:
    encoders.check_encoder(directory)
print("started" if context.context()._context_handle is not None else "not started")
"""


def test_checking_any_family_leaves_the_tensorflow_runtime_unstarted(tmp_path):
    """The run checks the encoder before the strategy exists, and MultiWorkerMirroredStrategy
    must configure collectives before the runtime starts: a check that starts it breaks every
    multi-worker run."""
    import subprocess
    import sys

    directories = [hf_reference.write_checkpoint(family, tmp_path / family) for family in FAMILIES]
    result = subprocess.run(
        [sys.executable, "-c", CHECK_IN_A_FRESH_PROCESS, *directories], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["not", "started"]
